# GPU run 16 (issue 12, session 9): the first chunk hop by hop at C=1 through the product's torch-cuda repository
# under MPS (scripts/gpu/probe/trace.py: Triton's request trace of `tts` and its statistics), and what one BLS call
# of a trivial model costs in the Python backend on this host (scripts/gpu/probe/handover.py).
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/lib.sh
echo "=== handover ($SECONDS s)"
timeout 150 python3 scripts/gpu/probe/handover.py --triton-home "$TRITON_HOME" --rounds 300 2>&1 | tee $OUT/handover.txt
echo "=== trace ($SECONDS s)"
timeout 300 python3 scripts/gpu/probe/trace.py --target torch-cuda --model-repository /tmp/repo \
  --triton-home "$TRITON_HOME" --mps --warmup 24 --requests 120 2>&1 | grep -v "^  " | tee $OUT/trace.txt
cp $(ls -t ~/.cache/tts-triton/logs/tritonserver-*.log 2>/dev/null | head -1) $OUT/triton.log 2>/dev/null
echo "done after $SECONDS s"
