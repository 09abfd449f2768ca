"""What the Python-backend models share, free of Triton: the life of a request in a model instance
(:mod:`~tts_triton.backend.lifecycle`: admission, in-band stops, deadlines, the error answer). The Triton
adapters (:mod:`tts_triton.triton`) apply it."""
