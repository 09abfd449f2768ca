# GPU run 17 (issue 12, session 9): run 14 again (the product path, `tts-triton bench --target torch-cuda --mps`,
# the same defaults, measured twice) with the bench's new rule: each level's opening burst (every worker's first
# request, all C sent at once) is reported apart, not among the measured requests.
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
