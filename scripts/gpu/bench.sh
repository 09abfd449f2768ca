#!/usr/bin/env bash
# The GPU benchmark on the GPU host, in one command, from anywhere in the checkout (with .gpu-bundle and
# .espeak-debs sent along; see scripts/gpu/README.md):
#     scripts/gpu/bench.sh [-- BENCH_ARGS...]
# Steps: the host's environment (host-env.sh: Triton, numpy 1.26 and tritonclient from the bundle, espeak-ng, this
# checkout importable), nvidia-smi, then `tts-triton bench --target torch-cuda --mps --baseline-device cuda
# --goals docs/bench-goals.toml --out $OUT` (--mps where nvidia-cuda-mps-control is installed) with BENCH_ARGS, or without them the full measurement: the sweep 1..256,
# the eager baseline at 1 and 64 and a 2000-request soak (5-8 minutes; each level holds its load 12 s: >= 10 s of
# measured load at every concurrency). The report, plot, JSON and server log are
# written into $OUT as the run goes (each level rewrites them), so a run cut off keeps what it finished.
# Environment: OUT (default bench-out), CEILING (probe/ceiling.py --json FILE of this machine: the report sets the
# best level against it), GPU_BUNDLE (.gpu-bundle; none: python3 on PATH is already the environment,
# e.g. to try the script on a CPU host with `-- --target onnxruntime-python`), ESPEAK_DEBS (.espeak-debs), BENCH_TIMEOUT
# (seconds before the bench gets SIGINT and stops its server cleanly, default 520: the whole script then fits in
# a 10-minute allowance).
set -eo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-bench-out}
mkdir -p "$OUT"
[ "${1:-}" = "--" ] && shift
say() { printf '==> [%4ds] %s\n' "$SECONDS" "$*"; }

# shellcheck source=host-env.sh
source scripts/gpu/host-env.sh
{ date -u; nvidia-smi || echo "bench.sh: nvidia-smi failed (no GPU?)"; } 2>&1 | tee "$OUT/nvidia-smi.txt"

full=(--concurrency 1 8 32 64 128 256 --seconds 12 --grace 20 --warmup 3 --baseline-concurrency 1 64 --soak 2000
      --soak-seconds 60)
[ $# -gt 0 ] && full=()
mps=()
command -v nvidia-cuda-mps-control >/dev/null 2>&1 && mps=(--mps)  # the GPU host's driver tools; a CPU host has none
ceiling=()
[ -n "${CEILING:-}" ] && ceiling=(--ceiling "$CEILING")  # the in-process ceiling of the same call (serving-check.sh)
bench=(python3 -m tts_triton.cli bench --target torch-cuda "${mps[@]}" --baseline-device cuda
       --goals docs/bench-goals.toml --out "$OUT" "${full[@]}" "${ceiling[@]}" "$@")
say "${bench[*]}"
status=0
PYTHONUNBUFFERED=1 timeout --signal=INT --kill-after=30 "${BENCH_TIMEOUT:-520}" "${bench[@]}" 2>&1 \
  | tee "$OUT/bench.log" || status=$?
say "exit status $status; results in $OUT: $(ls "$OUT" | tr '\n' ' ')"
exit "$status"
