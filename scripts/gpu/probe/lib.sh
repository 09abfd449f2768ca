# Helpers of the GPU runs (source from a run<N>.sh after `cd` to the project root): the environment, a torch-cuda
# repository, Triton under start.sh, the bench against it or through the product path, GPU memory, MPS by hand.
source scripts/gpu/probe/env.sh > $OUT/env.log 2>&1; tail -3 $OUT/env.log
build() {  # build ARGS...: the default voice's torch-cuda repository (ARGS: --out DIR and overrides)
  python3 -m tts_triton.export.repository --checkpoint tts_triton/assets/default_voice.pt \
    --voice-bank tts_triton/assets/voice_bank.json --target torch-cuda "$@"; }
memory() {  # GPU memory per process (model name from the stub's command line), then the device's total
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | while IFS=', ' read -r pid mib unit; do
    echo "$mib $unit $(ps -o args= -p "$pid" | tr ' ' '\n' | grep -m1 -E '_[0-9]+_[0-9]+$|^/tmp' || echo "$pid")"; done
  nvidia-smi --query-gpu=memory.used --format=csv,noheader; }
bench() {  # bench SECONDS ARGS...: tts_triton.bench against the server of start.sh on port 8000
  timeout "$1" python3 -m tts_triton.bench --url localhost:8001 --metrics-url http://localhost:8002/metrics \
    --warmup 3 --grace 20 "${@:2}" 2>&1 | grep -v "^  " | tail -45; }
product_bench() {  # product_bench SECONDS ARGS...: `tts-triton bench --target torch-cuda --mps`, embedded server
  timeout "$1" python3 -m tts_triton.bench --target torch-cuda --mps --triton-home "$TRITON_HOME" \
    --warmup 3 --grace 20 "${@:2}" 2>&1 | grep -v "^  " | tail -45
  cp $(ls -t ~/.cache/tts-triton/logs/tritonserver-*.log 2>/dev/null | head -1) $OUT/triton.log 2>/dev/null; }
stop() { kill $(cat /tmp/triton-8000.pid); sleep 4; }
mps_on() {  # an MPS control daemon for the servers started by start.sh from here on
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
  mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY; nvidia-cuda-mps-control -d; }
mps_off() { echo quit | nvidia-cuda-mps-control; }
#: The main measurement of a run: the sweep 1..256, the eager baseline in the same run, a 2000-request soak.
SWEEP=(--concurrency 1 8 32 64 128 256 --seconds 8 --baseline-device cuda --baseline-concurrency 1 64
       --soak 2000 --soak-seconds 60 --out $OUT/bench.md --plot $OUT/bench.png --json $OUT/bench.json)
served_sweep() {  # the main measurement against start.sh's server on /tmp/repo (built with the defaults)
  build --out /tmp/repo
  source scripts/gpu/probe/start.sh /tmp/repo 8000
  grep -o "[a-z_]*: [0-9]* CUDA graphs on.*" $OUT/triton-8000.log
  memory | tee -a $OUT/memory.txt
  bench 330 "${SWEEP[@]}"
  memory | tee -a $OUT/memory.txt
  stop; }
product_sweep() {  # product_sweep SECONDS: the main measurement through the product path; GPU memory per
  # process read SECONDS after the start (after the baseline, with the server up)
  ( sleep "$1"; nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader > $OUT/memory.txt ) &
  product_bench 330 --model-repository /tmp/repo "${SWEEP[@]}"
  cat $OUT/memory.txt; }
phases() {  # phases WARMUP LEVEL...: per level, the bench alone, then the models' phase counters (phases.py)
  local warmup=$1 c; shift
  for c in "$@"; do
    python3 scripts/gpu/probe/phases.py save /tmp/phases.json
    bench 60 --warmup "$warmup" --concurrency "$c" --seconds 5 --baseline-device none --out /tmp/p.md \
      --plot /tmp/p.png --json /tmp/p.json | grep "^triton "
    echo "concurrency $c:"; python3 scripts/gpu/probe/phases.py diff /tmp/phases.json
  done 2>&1 | tee $OUT/phases.txt; }
variant() {  # variant REPORT BUILD-ARGS...: a short sweep (1, 64, 256) of a repository built with BUILD-ARGS
  echo "=== variant $* ($SECONDS s)"
  build --out /tmp/variant "${@:2}"
  source scripts/gpu/probe/start.sh /tmp/variant 8000
  memory | tee -a $OUT/memory.txt
  bench 90 --concurrency 1 64 256 --seconds 6 --baseline-device none --out $OUT/$1 --plot /tmp/v.png --json /tmp/v.json
  stop; }
top_sampler() {  # every 20 s: the busiest processes over 2 s (full command lines), appended to $OUT/top.txt
  while sleep 18; do
    { echo "=== $SECONDS s"; top -b -c -n 2 -d 2 -w 220 | awk '/^top -/{n++} n==2' | sed -n '1,4p;7,30p'; } >> $OUT/top.txt
  done; }
