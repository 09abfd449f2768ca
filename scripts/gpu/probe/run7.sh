# GPU run 7 (issue 12, session 7): the final numbers through the product path (`tts-triton bench --target
# torch-cuda --mps`, default repository), then where a network call's time goes at concurrency 1 and 64 (the models'
# phase counters against Triton's compute_infer), then two vocoder instances.
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/lib.sh
product_sweep 80
echo "=== phases ($SECONDS s)"
mps_on
source scripts/gpu/probe/start.sh /tmp/repo 8000
phases 1 1 64
stop
if [ $SECONDS -lt 420 ]; then
  echo "=== two vocoder instances ($SECONDS s)"
  build --out /tmp/repo2v --instances vocoder=2
  source scripts/gpu/probe/start.sh /tmp/repo2v 8000
  bench 100 --concurrency 1 64 256 --seconds 6 --baseline-device none --out $OUT/voc2.md --plot /tmp/v.png \
    --json /tmp/v.json | grep "^triton "
  stop
fi
mps_off
echo "done after $SECONDS s"
