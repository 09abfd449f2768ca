"""The Triton-free synthesis core: request validation, the decode pipeline and in-process backends."""
