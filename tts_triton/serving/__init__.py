"""Triton-side code: the Python-backend adapters and the Triton-free decode pipeline they drive."""
