# GPU run 4 (issue 12, session 7): run 3 plus the packed decoder state, the 24/48/72/96-frame vocoder windows,
# K=16 by default and the style encoder on the CPU; per-process GPU memory; the sweep 1..256 with the eager baseline
# and a 2000-request soak; then two variants (2 decoder instances + 4 BLS; also 2 vocoder instances), shorter sweeps.
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/env.sh > $OUT/env.log 2>&1; tail -3 $OUT/env.log
build() { python3 -m tts_triton.export.repository --checkpoint tts_triton/assets/default_voice.pt \
  --voice-bank tts_triton/assets/voice_bank.json --target torch-cuda "$@"; }
memory() {  # GPU memory per process (model name from the stub's command line)
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | while IFS=', ' read -r pid mib unit; do
    echo "$mib $unit $(ps -o args= -p "$pid" | tr ' ' '\n' | grep -m1 -E '_[0-9]+_[0-9]+$|^/tmp' || echo "$pid")"; done
  nvidia-smi --query-gpu=memory.used --format=csv,noheader; }
bench() { timeout "$1" python3 -m tts_triton.bench --url localhost:8001 --metrics-url http://localhost:8002/metrics \
  --warmup 3 --grace 20 "${@:2}" 2>&1 | grep -v "^  " | tail -40; }
stop() { kill $(cat /tmp/triton-8000.pid); sleep 4; }

build --out /tmp/repo
source scripts/gpu/probe/start.sh /tmp/repo 8000
grep -o "[a-z_]*: [0-9]* CUDA graphs on.*" $OUT/triton-8000.log
memory | tee -a $OUT/memory.txt
bench 330 --concurrency 1 8 32 64 128 256 --seconds 8 --baseline-device cuda --baseline-concurrency 1 64 \
  --soak 2000 --soak-seconds 60 --out $OUT/bench.md --plot $OUT/bench.png --json $OUT/bench.json
memory | tee -a $OUT/memory.txt
stop

echo "=== variant: 2 decoder instances, 4 BLS instances ($SECONDS s)"
build --out /tmp/repo2 --instances decoder=2 --bls-instances 4
source scripts/gpu/probe/start.sh /tmp/repo2 8000
memory | tee -a $OUT/memory.txt
bench 90 --concurrency 1 64 256 --seconds 6 --baseline-device none --out $OUT/dec2.md --plot /tmp/dec2.png --json /tmp/dec2.json
stop

echo "=== variant: 2 decoder and 2 vocoder instances, 4 BLS instances ($SECONDS s)"
build --out /tmp/repo3 --instances decoder=2 --instances vocoder=2 --bls-instances 4
source scripts/gpu/probe/start.sh /tmp/repo3 8000
memory | tee -a $OUT/memory.txt
bench 90 --concurrency 1 64 256 --seconds 6 --baseline-device none --out $OUT/dec2voc2.md --plot /tmp/d2v2.png --json /tmp/d2v2.json
stop
echo "done after $SECONDS s"
