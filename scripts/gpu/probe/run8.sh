# GPU run 8 (issue 12, session 7): the final numbers through the product path (`tts-triton bench --target
# torch-cuda --mps`; default repository: K=16, 2 decoder, 2 vocoder and 4 BLS instances, style encoder on the CPU),
# with the eager baseline, GPU memory and a 2000-request soak; then the same with one decoder instance.
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/lib.sh
product_sweep 85
if [ $SECONDS -lt 330 ]; then
  echo "=== one decoder instance ($SECONDS s)"
  mps_on
  build --out /tmp/repo1 --instances decoder=1
  source scripts/gpu/probe/start.sh /tmp/repo1 8000
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | tee -a $OUT/memory.txt
  bench 100 --concurrency 1 64 256 --seconds 6 --baseline-device none --out $OUT/dec1.md --plot /tmp/v.png \
    --json /tmp/v.json | grep "^triton "
  stop; mps_off
fi
echo "done after $SECONDS s"
