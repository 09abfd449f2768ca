"""The Triton side: Python-backend models (the BLS ``tts``/``tts_offline`` and the per-network runtimes)
and their helpers. Everything Triton-free (pipeline, service, in-process backends) lives in
:mod:`tts_triton.serving`; modules here import ``triton_python_backend_utils`` only where Triton runs them."""
