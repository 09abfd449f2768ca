"""Names inside a built model repository: its files and the config parameters its models read.

The repository builder writes these names and the Triton models read them; both import them from here.
Plain Python with no imports, so the Triton adapters can use it without the export stack.
"""

from __future__ import annotations

# ---- files
#: The repository's manifest (target, fingerprints, models, build time) at its top level.
MANIFEST_FILE = "repository.json"
#: Beside a BLS model's ``config.pbtxt``: the voice bank it serves (also inlined as :data:`VOICE_BANK`).
VOICE_BANK_FILE = "voice_bank.json"
#: A model's version directory (``<model>/1/``).
VERSION_DIR = "1"
#: In a version directory: the Python-backend entry point.
MODEL_PY = "model.py"
#: In a version directory: the artifact of each target (ONNX graph, TensorRT plan, the checkpoint for PyTorch).
ONNX_FILE = "model.onnx"
PLAN_FILE = "model.plan"
CHECKPOINT_FILE = "model.pt"

# ---- config parameters (string values)
#: Every PyTorch network model and BLS model: ``ModelConfig.to_dict()`` as JSON.
MODEL_CONFIG = "model_config"
#: BLS models: the VoiceBank JSON, and the checkpoint's name they report.
VOICE_BANK = "voice_bank"
CHECKPOINT_NAME = "checkpoint_name"
#: ``tts``: ``"true"`` sets ``StreamingConfig.first_chunk_first`` (``tts_offline`` ignores it).
FIRST_CHUNK_FIRST = "first_chunk_first"
#: ``tts`` / ``tts_offline``: the admission bound, the most requests in flight in the model over all its instances
#: (each instance takes an equal share, :class:`~tts_triton.model_instance.lifecycle.Admission`); ``"0"``: no bound.
MAX_STREAMS = "max_streams"
#: ``tts`` / ``tts_offline``: threads that carry one process's network calls (its loop's default executor,
#: :class:`~tts_triton.triton.utils.CallThreads`); ``"0"``: the stub's default (``tts``) or
#: ``OFFLINE_BLS_THREADS`` (``tts_offline``).
BLS_CALL_THREADS = "bls_call_threads"
#: ``tts`` / ``tts_offline``: JSON ``{network or ensemble: Triton max_batch_size}``, the most rows one request of
#: the BLS's merged network calls may carry (:class:`~tts_triton.serving.coalesce.Coalescer`).
NETWORK_MAX_BATCH = "network_max_batch"
#: Network models: JSON ``{input name: [dynamic axis name, or "" for a fixed size, per dimension]}``.
INPUT_AXES = "input_axes"
#: Network models on the CPU: thread counts (ONNX Runtime's intra/inter-op pools; PyTorch's intra-op threads),
#: named as in Triton's ``onnxruntime`` backend.
INTRA_OP_THREADS = "intra_op_thread_count"
INTER_OP_THREADS = "inter_op_thread_count"
#: ``torch-cuda`` network models: the most rows x tokens (or mel frames) of one device call.
BATCH_BUDGET = "batch_budget"
#: ``torch-cuda`` network models: ``"true"`` for fp16 weights on a GPU; ``"false"`` runs without CUDA graphs.
FP16 = "fp16"
CUDA_GRAPHS = "cuda_graphs"
