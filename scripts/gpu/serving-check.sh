#!/usr/bin/env bash
# Issue 33's GPU checks of one tree, from anywhere in the checkout on the GPU host:
#     scripts/gpu/serving-check.sh [STEP...]        (STEPs: bench ceiling cancel; default all three)
# bench:   the full benchmark, scripts/gpu/bench.sh without arguments, into $OUT/bench (its goals table: 10 ms at
#          one stream, 2,000x at p99 <= 250 ms, 6 GB, no growth over the soak; about 4 minutes on the H200, M72);
# ceiling: the in-process ceiling of the served networks (probe/ceiling.py), into $OUT/ceiling.md (under 2 minutes);
# cancel:  streams cancelled over gRPC at random points for 45 s against the repository the bench built
#          (tests/served/test_cancel_stress.py --mode grpc-cancel: crashes counted), into $OUT/cancel-stress.json (its
#          console: cancel-stress.log).
# All three fit one 10-minute device call (the bench is stopped cleanly after BENCH_TIMEOUT s); on a slower host run
# `bench`, then `ceiling cancel` on the same warm machine (the repository stays in ~/.cache). Each step runs even
# when one before it failed; the exit status is the first failure's. Only the files read afterwards stay in $OUT
# (the device tool brings back 8): the bench's report, bench.json.gz, figure and server log (gzip), the ceiling
# table and the stress result.
# Environment: OUT (default bench-out), ESPEAK_DEBS and GPU_BUNDLE as for bench.sh; BENCH_TIMEOUT (default 380).
set -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-bench-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
say() { printf '==> [%4ds] %s\n' "$SECONDS" "$*"; }
steps=("$@")
((${#steps[@]})) || steps=(bench ceiling cancel)
status=0
step() { "$@" || { local s=$?; say "failed ($s): $*" >&2; ((status)) || status=$s; }; }  # stdout may be a result file
# the host's environment for the steps run here (bench.sh sets it up itself), set up once: it unpacks the bundle
host_env() {
  # shellcheck source=host-env.sh
  ((host_ready)) || { source scripts/gpu/host-env.sh >/dev/null || exit 2; host_ready=1; }
}
host_ready=0

for name in "${steps[@]}"; do
  case $name in
    bench)
      say "full bench into $OUT/bench"
      OUT=$OUT/bench BENCH_TIMEOUT=${BENCH_TIMEOUT:-380} step bash scripts/gpu/bench.sh
      rm -f "$OUT/bench/nvidia-smi.txt" "$OUT/bench/bench.log"
      gzip -f "$OUT/bench/bench.json" "$OUT/bench/tritonserver.log" 2>/dev/null ;;
    ceiling)
      host_env
      say "in-process ceiling"
      step timeout 120 python3 scripts/gpu/probe/ceiling.py --batches 8 16 32 64 128 --calls 30 --out "$OUT/ceiling.md" ;;
    cancel)
      host_env
      say "cancel stress (grpc-cancel, 45 s)"
      step timeout 150 python3 tests/served/test_cancel_stress.py --mode grpc-cancel --seconds 45 \
        >"$OUT/cancel-stress.json" 2>"$OUT/cancel-stress.log" ;;
    *) echo "serving-check.sh: unknown step '$name' (bench, ceiling, cancel)" >&2; exit 2 ;;
  esac
done
say "exit status $status; results: $(cd "$OUT" && find . -type f | sort | tr '\n' ' ')"
exit "$status"
