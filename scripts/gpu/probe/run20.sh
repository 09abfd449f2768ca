# GPU run 20 (issue 12, session 9): the BLS's time to a C=1 first chunk from inside it. bls_timeline.patch makes a
# copy of tts_triton/triton log each stream's BLS calls; trace.py sends the streams (and breaks the first chunk
# into hops from outside); bls_timeline.py takes the medians.
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/lib.sh
rm -rf /tmp/v-T /tmp/bls-timeline-*.jsonl && mkdir -p /tmp/v-T && cp -r tts_triton /tmp/v-T/
(cd /tmp/v-T && patch -s -p1 < "$ROOT/scripts/gpu/probe/bls_timeline.patch") || exit 1
ln -sfn /tmp/v-T/tts_triton/triton /tmp/pkgroot/tts_triton/triton
timeout 200 python3 scripts/gpu/probe/trace.py --target torch-cuda --model-repository /tmp/repo \
  --triton-home "$TRITON_HOME" --mps --warmup 24 --requests 120 2>&1 | grep -v "^  " | tee $OUT/trace.txt
python3 scripts/gpu/probe/bls_timeline.py --skip 24 | tee $OUT/bls-timeline.txt
echo "done after $SECONDS s"
