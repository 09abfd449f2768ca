"""What the Python-backend models share, free of Triton: the life of a request in a model instance
(:mod:`~tts_triton.backend.lifecycle`: admission, in-band stops, deadlines, the error answer) and the readers of
the model configs the repository builder writes (:mod:`~tts_triton.backend.params`: parameters and tensors;
:mod:`~tts_triton.backend.request_shapes`: the input shapes a network model accepts). The Triton adapters
(:mod:`tts_triton.triton`) apply them; the health check and the repository builder read configs with them too."""
