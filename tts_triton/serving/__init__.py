"""The Triton-free decode core: request validation, the decode pipeline, speech controls, word timestamps and
the in-process backends."""
