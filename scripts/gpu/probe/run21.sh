# Rerun at commit 52d41b6: its patches apply to the decode loop of then (the --first-chunk-first setting has
# since replaced them).
# GPU run 21 (issue 12, session 9): run 19 done right. Run 19's patches never reached the stubs: they import
# tts_triton from the project root (their working directory), not from /tmp/pkgroot where run 19 put the patched
# copy. Here the patch is applied in place. The C=1 trace and a short sweep (C=1, 64, 128) for the decode loop as
# it is (A), with one vocoder call of a stream in flight and decoding waiting for the first chunk (D: both of run
# 19's patches), and as it is again (A2).
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/lib.sh
measure() {  # measure NAME: the C=1 trace, then the short sweep
  echo "=== $1 ($SECONDS s): $(grep -c "_last_chunk\|first chunk alone" tts_triton/serving/pipeline.py) patched lines"
  timeout 150 python3 scripts/gpu/probe/trace.py --target torch-cuda --model-repository /tmp/repo \
    --triton-home "$TRITON_HOME" --mps --warmup 24 --requests 120 2>&1 | grep -v "^  " | tee $OUT/trace-$1.txt
  product_bench 150 --model-repository /tmp/repo --concurrency 1 64 128 --seconds 8 --baseline-device none \
    --out $OUT/$1.md --plot /tmp/$1.png --json /tmp/$1.json > /dev/null
  python3 -c "import json, sys; [print('$1', s['concurrency'], *(round(s[k], 4) for k in ('first_chunk_p50',
    'first_chunk_p99', 'rtf_mean', 'audio_per_second'))) for s in json.load(open(sys.argv[1]))['summaries']['levels']]" \
    /tmp/$1.json; }
measure A
patch -s -p1 < scripts/gpu/probe/one_vocoder_call.patch && patch -s -p1 < scripts/gpu/probe/first_chunk_alone.patch \
  && measure D
patch -s -R -p1 < scripts/gpu/probe/first_chunk_alone.patch && patch -s -R -p1 < scripts/gpu/probe/one_vocoder_call.patch
if [ $SECONDS -lt 300 ]; then measure A2; fi
echo "done after $SECONDS s"
