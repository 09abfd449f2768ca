#!/usr/bin/env bash
# Two trees' serving on one GPU host in one call: the earlier tree's bench, then this checkout's, with the same
# arguments, the same voice and the same machine, then the two side by side.
#     scripts/gpu/ab-bench.sh BEFORE_DIR [-- BENCH_ARGS...]
# BEFORE_DIR holds the earlier tree's files without its voice, made here with e.g.
#     mkdir .ab-before && git archive MAIN -- . ':!docs' ':!tests' ':!tts_triton/assets' | tar -x -C .ab-before
# (about 2 MB; carry it with .gpu-bundle and .espeak-debs). This checkout's tts_triton/assets (the voice and its
# bank), .gpu-bundle and .espeak-debs (or .espeak-min) are linked into it, so only the code differs; its bench reads
# an empty goals file (this checkout's may name goals the earlier bench does not know). Each tree runs its own scripts/gpu/bench.sh (which makes that tree the one the stubs import) with its
# own repository under /tmp; default BENCH_ARGS: the levels 1 8 64 128 256, 12 s of measured starts each, no eager
# baseline, no soak (about 2.5 minutes a tree). Into $OUT (default bench-out): before/ and after/ (each bench's
# files), and compare.md (python -m tts_triton.bench.compare).
# A shared host can slow down between the two runs (the reports' *Shared* line: other processes, CPU steal):
# AB_ORDER="before after after before" measures each tree twice in mirrored order, into before/, after/, after-2/
# and before-2/, with compare-2.md for the second pair, so that a drift shows as two ratios that disagree.
# Environment: OUT, AB_TIMEOUT (seconds per tree before its bench is interrupted cleanly, default 250), AB_ORDER.
set -eo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
before=${1:?usage: scripts/gpu/ab-bench.sh BEFORE_DIR [-- BENCH_ARGS...]}
shift
[ "${1:-}" = "--" ] && shift
OUT=${OUT:-bench-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)  # each bench runs from its own tree
args=("$@")
((${#args[@]})) || args=(--concurrency 1 8 64 128 256 --seconds 12 --grace 20 --warmup 3 --baseline-device none)
here=$PWD
before=$(cd "$before" && pwd)
rm -rf "$before/tts_triton/assets"
ln -s "$here/tts_triton/assets" "$before/tts_triton/assets"
mkdir -p "$before/docs"
for linked in .gpu-bundle .espeak-debs .espeak-min; do
  if [ -e "$here/$linked" ] && [ ! -e "$before/$linked" ]; then ln -s "$here/$linked" "$before/$linked"; fi
done
# the goals the earlier tree's bench.sh reads: none (an A/B compares; this tree's goals may name goals it lacks)
[ -e "$before/docs/bench-goals.toml" ] || : >"$before/docs/bench-goals.toml"
status=0
declare -A runs=([before]=0 [after]=0)
for side in ${AB_ORDER:-before after}; do
  case $side in
    before) tree=$before ;;
    after) tree=$here ;;
    *) echo "ab-bench.sh: AB_ORDER names before and after, not '$side'" >&2; exit 2 ;;
  esac
  runs[$side]=$((runs[$side] + 1))
  name=$side
  ((runs[$side] == 1)) || name=$side-${runs[$side]}
  printf '==> [%4ds] %s: %s\n' "$SECONDS" "$name" "$tree"
  OUT="$OUT/$name" BENCH_TIMEOUT=${AB_TIMEOUT:-250} bash "$tree/scripts/gpu/bench.sh" -- \
    --model-repository "/tmp/ab-$side-repository" "${args[@]}" || status=$?
done
# each bench makes its tree the one the environment imports: where that environment is python3 on PATH (not the
# bundle's, made afresh by each host-env.sh), it imports this checkout again
[ "$side" = before ] && [ "${GPU_BUNDLE:-}" = none ] && { scripts/gpu/checkout-path.sh || status=$?; }
pairs=$((runs[before] < runs[after] ? runs[before] : runs[after]))
for ((pair = 1; pair <= pairs; pair++)); do
  suffix=
  ((pair == 1)) || suffix=-$pair
  python3 -m tts_triton.bench.compare "$OUT/before$suffix/bench.json" "$OUT/after$suffix/bench.json" \
    --labels "before$suffix" "after$suffix" --out "$OUT/compare$suffix.md" || status=$?
done
exit "$status"
