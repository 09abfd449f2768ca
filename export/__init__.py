"""Export: PyTorch checkpoints to ONNX, TensorRT engines and the Triton model repository."""
