# GPU run 1: environment, in-process probe, torch-cuda repository through Triton, short concurrency sweep.
set -u
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version --format=csv | tee $OUT/nvidia-smi.txt
source scripts/gpu/probe/env.sh > $OUT/env.log 2>&1; tail -3 $OUT/env.log
python3 -c "import torch; print(torch.__version__, torch.cuda.get_device_name(0), torch.backends.cudnn.version())"
N=20 timeout 150 python3 scripts/gpu/probe/probe.py 2>&1 | grep -v Warning | tail -40
python3 -m tts_triton.export.repository --checkpoint tts_triton/assets/default_voice.pt \
  --voice-bank tts_triton/assets/voice_bank.json --target torch-cuda --out /tmp/repo
source scripts/gpu/probe/start.sh /tmp/repo 8000
grep -i "captured\|error" $OUT/triton-8000.log | head -20
curl -s localhost:8002/metrics | grep "^nv_gpu_memory_used_bytes" | tee $OUT/metrics-start.txt
timeout 200 python3 -m tts_triton.bench --url localhost:8001 --concurrency 1 8 64 256 --seconds 8 --grace 30 \
  --warmup 3 --out $OUT/bench.md --plot $OUT/bench.png 2>&1 | tail -60
curl -s localhost:8002/metrics | grep "^nv_gpu_memory_used_bytes" | tee $OUT/metrics-end.txt
nvidia-smi --query-gpu=memory.used --format=csv
kill $(cat /tmp/triton-8000.pid); sleep 3
