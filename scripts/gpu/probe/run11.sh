# GPU run 11 (issue 12, session 8): the final numbers through the product path (`tts-triton bench --target
# torch-cuda --mps`; defaults: decoding ahead of vocoding, batch budgets with the decoder's max batch 64, 8 BLS
# instances whose front end is loaded at start) and GPU memory per process; then the same
# repository with 4 BLS instances.
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/lib.sh
product_sweep 85
if [ $SECONDS -lt 420 ]; then
  mps_on
  echo "=== variant: 4 BLS instances ($SECONDS s)"
  build --out /tmp/variant --bls-instances 4
  source scripts/gpu/probe/start.sh /tmp/variant 8000
  memory
  bench 120 --concurrency 1 64 128 256 --seconds 6 --baseline-device none --out $OUT/bls4.md --plot /tmp/v.png \
    --json /tmp/v.json
  stop; mps_off
fi
echo "done after $SECONDS s"
