# GPU run 8 (issue 12, session 7): the final numbers through the product path (`tts-triton bench --target
# torch-cuda --mps`; default repository: K=16, 2 decoder, 2 vocoder and 4 BLS instances, style encoder on the CPU),
# with the eager baseline, GPU memory and a 2000-request soak; then the same with one decoder instance.
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/env.sh > $OUT/env.log 2>&1; tail -3 $OUT/env.log
( sleep 85; nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader > $OUT/memory.txt ) &
timeout 330 python3 -m tts_triton.bench --target torch-cuda --mps --triton-home "$TRITON_HOME" --model-repository /tmp/repo \
  --concurrency 1 8 32 64 128 256 --seconds 8 --grace 20 --warmup 3 --baseline-device cuda --baseline-concurrency 1 64 \
  --soak 2000 --soak-seconds 60 --out $OUT/bench.md --plot $OUT/bench.png --json $OUT/bench.json 2>&1 | grep -v "^  " | tail -30
cp $(ls -t ~/.cache/tts-triton/logs/tritonserver-*.log 2>/dev/null | head -1) $OUT/triton.log 2>/dev/null
if [ $SECONDS -lt 330 ]; then
  echo "=== one decoder instance ($SECONDS s)"
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
  mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY; nvidia-cuda-mps-control -d
  python3 -m tts_triton.export.repository --checkpoint tts_triton/assets/default_voice.pt \
    --voice-bank tts_triton/assets/voice_bank.json --target torch-cuda --out /tmp/repo1 --instances decoder=1
  source scripts/gpu/probe/start.sh /tmp/repo1 8000
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | tee -a $OUT/memory.txt
  timeout 100 python3 -m tts_triton.bench --url localhost:8001 --metrics-url http://localhost:8002/metrics --warmup 3 \
    --grace 20 --concurrency 1 64 256 --seconds 6 --baseline-device none --out $OUT/dec1.md --plot /tmp/v.png \
    --json /tmp/v.json 2>&1 | grep "^triton "
  kill $(cat /tmp/triton-8000.pid); sleep 4; echo quit | nvidia-cuda-mps-control
fi
echo "done after $SECONDS s"
