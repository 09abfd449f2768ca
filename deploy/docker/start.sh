#!/usr/bin/env bash
# Start script of the serving image (nvcr.io/nvidia/tritonserver:25.06-py3 + tts_triton).
#
# MODEL_SOURCE (default /models) is an `onnxruntime` repository (`tts-triton build-repo --target onnxruntime`).
# TTS_RUNTIME=onnxruntime serves it as it is. TTS_RUNTIME=tensorrt (the default) serves a `tensorrt`
# repository built from it on first start: the plans are built here, on this GPU with this TensorRT
# (python -m tts_triton.export.tensorrt), into TTS_STATE (default /var/cache/tts-triton; mount a volume
# there to keep them across restarts), and rebuilt only when the ONNX files, the spec, the TensorRT version
# or the GPU changed. Any further arguments go to tritonserver, which runs through tts_triton.processes.memory (jemalloc,
# no gRPC request pool, shared-memory regions capped at TTS_TRITON_SHM_REGION_MB; deploy/k8s/README.md "Memory").
set -euo pipefail

source_repo=${MODEL_SOURCE:-/models}
runtime=${TTS_RUNTIME:-tensorrt}
state=${TTS_STATE:-/var/cache/tts-triton}
python=${PYTHON:-python3}

manifest=$source_repo/repository.json
[[ -f $manifest ]] || { echo "start.sh: $manifest not found: MODEL_SOURCE must be a built repository" >&2; exit 1; }
target=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["target"])' "$manifest")
if [[ $runtime == onnxruntime || $target == tensorrt ]]; then
  exec "$python" -m tts_triton.processes.memory tritonserver --model-repository="$source_repo" "$@"
fi
[[ $runtime == tensorrt ]] || { echo "start.sh: TTS_RUNTIME must be tensorrt or onnxruntime, not $runtime" >&2; exit 1; }
[[ $target == onnxruntime* ]] || { echo "start.sh: $source_repo is a $target repository, not an ONNX one" >&2; exit 1; }

# The ONNX files, model config and voice bank the tensorrt repository is built from, taken from the source.
onnx=$state/onnx engines=$state/engines repo=$state/model_repository
mkdir -p "$onnx" "$engines"
for network in text_encoder style_encoder decoder vocoder; do
  ln -sf "$source_repo/$network/1/model.onnx" "$onnx/$network.onnx"
done
"$python" -c 'import json, sys; json.dump(json.load(open(sys.argv[1]))["model_config"], open(sys.argv[2], "w"))' \
  "$manifest" "$state/model_config.json"
checkpoint=${TTS_CHECKPOINT:-$("$python" -c 'import importlib.util, pathlib
spec = importlib.util.find_spec("tts_triton")
print(pathlib.Path(next(iter(spec.submodule_search_locations))) / "assets" / "default_voice.pt")')}

echo "start.sh: TensorRT plans in $engines (built on first start, then checked)"
"$python" -m tts_triton.export.tensorrt --onnx-dir "$onnx" --engines-dir "$engines" \
  --model-config "$state/model_config.json"
"$python" -m tts_triton.export.tensorrt --onnx-dir "$onnx" --engines-dir "$engines" \
  --model-config "$state/model_config.json" --check
"$python" -m tts_triton.export.repository --target tensorrt --onnx-dir "$onnx" --engines-dir "$engines" \
  --checkpoint "$checkpoint" --voice-bank "$source_repo/tts/voice_bank.json" \
  --model-config "$state/model_config.json" --out "$repo"
exec "$python" -m tts_triton.processes.memory tritonserver --model-repository="$repo" "$@"
