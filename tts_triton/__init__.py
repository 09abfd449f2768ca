"""tts-triton: expressive streaming text-to-speech served by NVIDIA Triton Inference Server."""

__version__ = "0.1.0"
