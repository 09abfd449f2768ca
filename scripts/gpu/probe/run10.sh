# GPU run 10 (issue 12, session 8): the product path (`tts-triton bench --target torch-cuda --mps`) with this
# session's defaults (decoding ahead of vocoding, batch budgets, 8 BLS instances), GPU busy % sampled each second
# (nvidia-smi dmon) and memory per process; then the same with K=8 decoder steps per call.
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/lib.sh
nvidia-smi dmon -s u -d 1 -c 400 > $OUT/dmon.txt 2>&1 &
dmon=$!
product_sweep 85
kill $dmon
if [ $SECONDS -lt 420 ]; then
  mps_on
  echo "=== variant K=8 ($SECONDS s)"
  build --out /tmp/variant --steps-per-call 8
  source scripts/gpu/probe/start.sh /tmp/variant 8000
  bench 120 --concurrency 1 64 128 256 --seconds 6 --baseline-device none --out $OUT/k8.md --plot /tmp/v.png \
    --json /tmp/v.json
  stop; mps_off
fi
echo "done after $SECONDS s"
