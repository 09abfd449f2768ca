"""The network models' engine, free of Triton: how one dynamic batch of requests to a network model runs
(:mod:`~tts_triton.engine.batching`: merge the requests that can share a call, split the results back;
:mod:`~tts_triton.engine.graphs`: run a stage on a device, as captured CUDA graphs on CUDA). Only the network
adapters (:mod:`tts_triton.triton.torch_model`, :mod:`tts_triton.triton.onnx_model`) use it."""
