# GPU run 2: the torch-cuda repository through Triton, streaming sweep over gRPC with the eager baseline.
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/env.sh > $OUT/env.log 2>&1; tail -3 $OUT/env.log
python3 -m tts_triton.export.repository --checkpoint tts_triton/assets/default_voice.pt \
  --voice-bank tts_triton/assets/voice_bank.json --target torch-cuda --out /tmp/repo
source scripts/gpu/probe/start.sh /tmp/repo 8000
timeout 420 python3 -m tts_triton.bench --url localhost:8001 --metrics-url http://localhost:8002/metrics \
  --concurrency 1 8 32 64 128 256 --seconds 8 --grace 20 --warmup 3 --baseline-device cuda \
  --baseline-concurrency 1 64 --out $OUT/bench.md --plot $OUT/bench.png --json $OUT/bench.json 2>&1 | tail -80
nvidia-smi --query-gpu=memory.used --format=csv
kill $(cat /tmp/triton-8000.pid); sleep 3
