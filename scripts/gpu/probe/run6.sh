# GPU run 6 (issue 12, session 7): the product path. `tts-triton bench --target torch-cuda --mps` starts the
# embedded Triton (from the bundle) on the default torch-cuda repository (K=16, 2 decoder and 4 BLS instances,
# style encoder on the CPU, vocoder windows of 48/96 frames) under an MPS daemon of its own: the sweep 1..256,
# the eager baseline in the same run, GPU memory, a 2000-request soak. Then one decoder and two BLS instances.
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/lib.sh
product_sweep 75
echo "=== one decoder, two BLS instances, MPS by hand, served with start.sh ($SECONDS s)"
mps_on
build --out /tmp/repo1 --instances decoder=1 --bls-instances 2
source scripts/gpu/probe/start.sh /tmp/repo1 8000
bench 120 --concurrency 1 64 128 256 --seconds 6 --baseline-device none --out $OUT/dec1.md --plot /tmp/dec1.png \
  --json /tmp/dec1.json
stop; mps_off
echo "done after $SECONDS s"
