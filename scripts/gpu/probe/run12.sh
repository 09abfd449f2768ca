# GPU run 12 (issue 12, session 8): run 11's product path again (the same defaults: how much a rerun moves); where
# a network call's time goes at concurrency 1, 64 and 128 (the models' phase counters against Triton's
# compute_infer); then run 10's larger decoder and text encoder batches (decoder max batch 128, budgets 128x64
# and 32x256 row-tokens) with memory per process.
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/lib.sh
product_sweep 85
mps_on
echo "=== phases ($SECONDS s)"
source scripts/gpu/probe/start.sh /tmp/repo 8000
phases 8 1 64 128
stop
if [ $SECONDS -lt 430 ]; then
  echo "=== variant: run 10's batches ($SECONDS s)"
  build --out /tmp/variant --max-batch-size decoder=128 --batch-budget decoder=8192 --batch-budget text_encoder=8192
  source scripts/gpu/probe/start.sh /tmp/variant 8000
  memory
  bench 120 --concurrency 1 64 128 256 --seconds 6 --baseline-device none --out $OUT/budget8k.md \
    --plot /tmp/v.png --json /tmp/v.json
  stop
fi
mps_off
echo "done after $SECONDS s"
