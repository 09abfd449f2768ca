# Rerun at commit 52d41b6: its patches apply to the decode loop of then (the --first-chunk-first setting has
# since replaced them).
# Flawed, kept as the record of run 19: the patched copy under /tmp/pkgroot never reached the stubs, which import
# tts_triton from the project root (their working directory); every variant ran the unchanged loop. Run 21 redoes it.
# GPU run 19 (issue 12, session 9): does the first chunk wait on the calls started beside it? The C=1 trace
# (trace.py) and a short sweep (C=1, 64, 128) of the product's torch-cuda repository for the decode loop as it is
# (A) and with probe patches to tts_triton/serving: B one vocoder call of a stream in flight at a time
# (one_vocoder_call.patch); C the first decoder call's first chunk vocoded before decoding goes on
# (first_chunk_alone.patch); D both. Then A again (drift).
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/lib.sh
command -v patch git | tee $OUT/tools.txt
serving() {  # serving NAME PATCH...: the stubs import tts_triton/serving with PATCHes applied
  rm -rf /tmp/v-$1 && mkdir -p /tmp/v-$1 && cp -r tts_triton /tmp/v-$1/
  (cd /tmp/v-$1 && for p in "${@:2}"; do patch -s -p1 < "$ROOT/scripts/gpu/probe/$p.patch" || exit 1; done) || return 1
  ln -sfn /tmp/v-$1/tts_triton/serving /tmp/pkgroot/tts_triton/serving
  echo "patched lines: $(grep -c "_last_chunk\|first chunk alone" /tmp/pkgroot/tts_triton/serving/pipeline.py)"; }
measure() {  # measure NAME: the C=1 trace, then the short sweep
  echo "=== $1 ($SECONDS s)"
  timeout 150 python3 scripts/gpu/probe/trace.py --target torch-cuda --model-repository /tmp/repo \
    --triton-home "$TRITON_HOME" --mps --warmup 24 --requests 120 2>&1 | grep -v "^  " | tee $OUT/trace-$1.txt
  product_bench 150 --model-repository /tmp/repo --concurrency 1 64 128 --seconds 8 --baseline-device none \
    --out $OUT/$1.md --plot /tmp/$1.png --json $OUT/$1.json > $OUT/bench-$1.log
  python3 -c "import json, sys; [print('$1', s['concurrency'], *(round(s[k], 4) for k in ('first_chunk_p50',
    'first_chunk_p99', 'rtf_mean', 'audio_per_second'))) for s in json.load(open(sys.argv[1]))['summaries']['levels']]" \
    $OUT/$1.json; }
serving A && measure A
serving B one_vocoder_call && measure B
serving C first_chunk_alone && measure C
serving D one_vocoder_call first_chunk_alone && measure D
if [ $SECONDS -lt 420 ]; then serving A2 && measure A2; fi
echo "done after $SECONDS s"
