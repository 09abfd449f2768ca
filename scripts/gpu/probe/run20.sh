# GPU run 20 (issue 12, session 9): the BLS's time to a C=1 first chunk from inside it. bls_timeline.patch makes
# tts_triton/triton/bls.py log each stream's BLS calls (patched in place on the host: the stubs import the package
# from the project root, their working directory); trace.py sends the streams (and breaks the first chunk into hops
# from outside); bls_timeline.py takes the medians.
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/lib.sh
rm -f /tmp/bls-timeline-*.jsonl
patch -s -p1 < scripts/gpu/probe/bls_timeline.patch || exit 1
timeout 200 python3 scripts/gpu/probe/trace.py --target torch-cuda --model-repository /tmp/repo \
  --triton-home "$TRITON_HOME" --mps --warmup 24 --requests 120 2>&1 | grep -v "^  " | tee $OUT/trace.txt
patch -s -R -p1 < scripts/gpu/probe/bls_timeline.patch
python3 scripts/gpu/probe/bls_timeline.py --skip 24 | tee $OUT/bls-timeline.txt
echo "done after $SECONDS s"
