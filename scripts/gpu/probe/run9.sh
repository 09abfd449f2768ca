# GPU run 9 (issue 12, session 8): the product path (`tts-triton bench --target torch-cuda --mps`) with decoding
# running ahead of vocoding in the BLS, host CPU per process sampled during the sweep; each network process's GPU
# memory by max batch (in process, no MPS); then the same repository as the sweep's with 8 BLS instances.
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/lib.sh
top_sampler &
sampler=$!
product_sweep 85
kill $sampler
echo "=== memory by max batch ($SECONDS s)"
for setting in "decoder 128 16" "decoder 64 16" "decoder 32 16" "vocoder 64" "vocoder 32" "text_encoder 32" \
               "text_encoder 16"; do
  [ $SECONDS -lt 440 ] && timeout 40 python3 scripts/gpu/probe/memory.py $setting 2>&1 | grep -v Warning \
    | tee -a $OUT/memory-probe.txt
done
if [ $SECONDS -lt 450 ]; then
  mps_on
  variant bls8.md --bls-instances 8
  mps_off
fi
echo "done after $SECONDS s"
