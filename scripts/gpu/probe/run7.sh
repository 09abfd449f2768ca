# GPU run 7 (issue 12, session 7): the final numbers through the product path (`tts-triton bench --target
# torch-cuda --mps`, default repository), then where a network call's time goes at concurrency 1 and 64 (the models'
# phase counters against Triton's compute_infer), then two vocoder instances.
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/env.sh > $OUT/env.log 2>&1; tail -3 $OUT/env.log
( sleep 80; nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader > $OUT/memory.txt ) &
timeout 330 python3 -m tts_triton.bench --target torch-cuda --mps --triton-home "$TRITON_HOME" --model-repository /tmp/repo \
  --concurrency 1 8 32 64 128 256 --seconds 8 --grace 20 --warmup 3 --baseline-device cuda --baseline-concurrency 1 64 \
  --soak 2000 --soak-seconds 60 --out $OUT/bench.md --plot $OUT/bench.png --json $OUT/bench.json 2>&1 | grep -v "^  " | tail -30
cp $(ls -t ~/.cache/tts-triton/logs/tritonserver-*.log 2>/dev/null | head -1) $OUT/triton.log 2>/dev/null
echo "=== phases ($SECONDS s)"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY; nvidia-cuda-mps-control -d
source scripts/gpu/probe/start.sh /tmp/repo 8000
for c in 1 64; do
  python3 scripts/gpu/probe/phases.py save /tmp/phases.json
  timeout 60 python3 -m tts_triton.bench --url localhost:8001 --warmup 1 --grace 20 --concurrency $c --seconds 5 \
    --baseline-device none --out /tmp/p.md --plot /tmp/p.png --json /tmp/p.json 2>&1 | grep "^triton "
  echo "concurrency $c:"; python3 scripts/gpu/probe/phases.py diff /tmp/phases.json
done 2>&1 | tee $OUT/phases.txt
kill $(cat /tmp/triton-8000.pid); sleep 4
if [ $SECONDS -lt 420 ]; then
  echo "=== two vocoder instances ($SECONDS s)"
  python3 -m tts_triton.export.repository --checkpoint tts_triton/assets/default_voice.pt \
    --voice-bank tts_triton/assets/voice_bank.json --target torch-cuda --out /tmp/repo2v --instances vocoder=2
  source scripts/gpu/probe/start.sh /tmp/repo2v 8000
  timeout 100 python3 -m tts_triton.bench --url localhost:8001 --metrics-url http://localhost:8002/metrics --warmup 3 \
    --grace 20 --concurrency 1 64 256 --seconds 6 --baseline-device none --out $OUT/voc2.md --plot /tmp/v.png \
    --json /tmp/v.json 2>&1 | grep "^triton "
  kill $(cat /tmp/triton-8000.pid); sleep 4
fi
echo quit | nvidia-cuda-mps-control
echo "done after $SECONDS s"
