"""The Triton side: Python-backend models (the BLS ``tts``/``tts_offline`` and the per-network runtimes)
and their helpers. What they apply free of Triton lives beside them: the decode core in
:mod:`tts_triton.serving`, the request lifecycle and config readers in :mod:`tts_triton.model_instance`, the network
engine in :mod:`tts_triton.engine`; modules here import ``triton_python_backend_utils`` only where Triton runs them."""
