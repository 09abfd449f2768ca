"""What a Python-backend model instance runs by, free of Triton: the life of a request in it
(:mod:`~tts_triton.model_instance.lifecycle`: admission, in-band stops, deadlines, the error answer) and the readers
of the model config it is loaded with, which the repository builder writes (:mod:`~tts_triton.model_instance.params`:
parameters and tensors; :mod:`~tts_triton.model_instance.request_shapes`: the input shapes a network model accepts),
and its metrics' updates in batches (:mod:`~tts_triton.model_instance.metrics`).
The Triton adapters (:mod:`tts_triton.triton`) apply them; the health check and the repository builder read configs
with them too."""
