# GPU run 6 (issue 12, session 7): the product path. `tts-triton bench --target torch-cuda --mps` starts the
# embedded Triton (from the bundle) on the default torch-cuda repository (K=16, 2 decoder and 4 BLS instances,
# style encoder on the CPU, vocoder windows of 48/96 frames) under an MPS daemon of its own: the sweep 1..256,
# the eager baseline in the same run, GPU memory, a 2000-request soak. Then one decoder and two BLS instances.
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/env.sh > $OUT/env.log 2>&1; tail -3 $OUT/env.log
bench() { timeout "$1" python3 -m tts_triton.bench --target torch-cuda --mps --triton-home "$TRITON_HOME" \
  --warmup 3 --grace 20 "${@:2}" 2>&1 | grep -v "^  " | tail -45; }
( sleep 75; nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader > $OUT/memory.txt ) &
bench 330 --model-repository /tmp/repo --concurrency 1 8 32 64 128 256 --seconds 8 --baseline-device cuda \
  --baseline-concurrency 1 64 --soak 2000 --soak-seconds 60 --out $OUT/bench.md --plot $OUT/bench.png --json $OUT/bench.json
cp $(ls -t ~/.cache/tts-triton/logs/tritonserver-*.log 2>/dev/null | head -1) $OUT/triton.log 2>/dev/null
echo "=== one decoder, two BLS instances, MPS by hand, served with start.sh ($SECONDS s)"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY; nvidia-cuda-mps-control -d
python3 -m tts_triton.export.repository --checkpoint tts_triton/assets/default_voice.pt \
  --voice-bank tts_triton/assets/voice_bank.json --target torch-cuda --out /tmp/repo1 --instances decoder=1 --bls-instances 2
source scripts/gpu/probe/start.sh /tmp/repo1 8000
timeout 120 python3 -m tts_triton.bench --url localhost:8001 --metrics-url http://localhost:8002/metrics --warmup 3 \
  --grace 20 --concurrency 1 64 128 256 --seconds 6 --baseline-device none --out $OUT/dec1.md --plot /tmp/dec1.png \
  --json /tmp/dec1.json 2>&1 | grep -v "^  " | tail -45
kill $(cat /tmp/triton-8000.pid); sleep 4; echo quit | nvidia-cuda-mps-control
echo "done after $SECONDS s"
