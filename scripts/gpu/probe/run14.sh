# GPU run 14 (issue 12, session 8): the final numbers through the product path (`tts-triton bench --target
# torch-cuda --mps`; defaults: decoding ahead of vocoding, 8 BLS instances with their front end loaded at start,
# batch budgets decoder 128x64 and text encoder 32x256 row-tokens, vocoder 64x48 frames, a 4 MiB cuBLAS
# workspace per process), memory per process; then the whole measurement once more (how much a rerun moves).
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/lib.sh
product_sweep 85
if [ $SECONDS -lt 300 ]; then
  echo "=== rerun ($SECONDS s)"
  product_bench 280 --model-repository /tmp/repo "${SWEEP[@]}" --out $OUT/rerun.md --plot $OUT/rerun.png \
    --json $OUT/rerun.json
fi
echo "done after $SECONDS s"
