#!/usr/bin/env bash
# The serving checks of one tree on the GPU host, from anywhere in the checkout:
#     scripts/gpu/serving-check.sh [STEP...]      (STEPs: ceiling bench ab cancel gateway; default: ceiling bench)
# ceiling: the in-process ceiling of the served networks (probe/ceiling.py) into $OUT/latest/ceiling.md and
#          ceiling.json (about a minute), before the server starts, so that the bench is judged against it;
# bench:   the full benchmark (scripts/gpu/bench.sh without arguments: the sweep 1..256, the eager baseline, a
#          2,000-request soak) into $OUT/latest: BENCHMARKS.md, concurrency.png, bench.json.gz, the layout of
#          docs/records/bench/latest/. Its goals table (docs/bench-goals.toml) judges the ceiling of the same call
#          (x_real_time_vs_ceiling), the first chunk at one stream, errors, the soak and GPU memory; the report names
#          the host's CPU and kernel (about 4 minutes on an H100, M82);
# ab:      the earlier tree in .ab-before against this one (ab-bench.sh, AB_ORDER "before after after before" unless
#          set) at the levels AB_LEVELS (default "1 256"), AB_SECONDS (default 6) of measured starts each, into
#          $OUT/ab (compare.md, compare-2.md; about a minute a tree);
# cancel:  streams cancelled over gRPC at random points for 45 s (tests/served/test_cancel_stress.py --mode grpc-cancel)
#          against the repository the bench built;
# gateway: the OpenAI gateway against direct gRPC at GATEWAY_STREAMS (default "64 256") with one gateway process and
#          GATEWAY_REPLICAS (default 4) (tts-triton bench-gateway --target torch-cuda);
# profile: py-spy on every Python process of the server (probe/hot_paths.py) for 15 s of a bench level at PROFILE_LEVEL
#          (default 128) streams, summed by process kind (py-spy: on PATH, or its wheel carried in .whl/).
# Each step runs even when one before it failed; the exit status is the first failure's. The device tool brings back
# 8 files: $OUT keeps latest/ (5 files) and ab/compare*.md; everything else (server logs, the A/B's reports, the
# cancel stress, the gateway's report, the profile, this console) is packed into $OUT/more.tar.gz.
# Time on an H100: ceiling + bench about 5-6 minutes (the bench is stopped cleanly after BENCH_TIMEOUT, 330 s), ab
# about 5 (AB_TIMEOUT, 70 s a tree, four trees), cancel + gateway + profile about 5: three 10-minute calls on the same
# warm machine; in one call, ceiling bench ab with BENCH_TIMEOUT=250 and AB_ORDER="before after" (no mirror).
# Environment: OUT (default bench-out), ESPEAK_DEBS and GPU_BUNDLE as for bench.sh; BENCH_TIMEOUT (default 330),
# BENCH_ARGS (replaces the full bench's arguments, e.g. on a CPU host), AB_LEVELS, AB_SECONDS, AB_TIMEOUT, AB_ORDER,
# AB_ARGS (replaces the A/B's bench arguments), CEILING_ARGS, GATEWAY_STREAMS, GATEWAY_REPLICAS, GATEWAY_ARGS,
# PROFILE_LEVEL, PROFILE_ARGS.
set -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-bench-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
mkdir -p "$OUT/more"
exec > >(tee -a "$OUT/more/console.log") 2>&1
say() { printf '==> [%4ds] %s\n' "$SECONDS" "$*"; }
steps=("$@")
((${#steps[@]})) || steps=(ceiling bench)
status=0
step() { "$@" || { local s=$?; say "failed ($s): $*" >&2; ((status)) || status=$s; }; }
# the host's environment for the steps run here (bench.sh and ab-bench.sh set it up themselves), set up once
host_env() {
  # shellcheck source=host-env.sh
  ((host_ready)) || { source scripts/gpu/host-env.sh >/dev/null || exit 2; host_ready=1; }
}
host_ready=0
latest=$OUT/latest
mkdir -p "$latest"

for name in "${steps[@]}"; do
  case $name in
    ceiling)
      host_env
      say "in-process ceiling into $latest/ceiling.md"
      read -ra ceiling_args <<<"${CEILING_ARGS:---batches 8 16 32 64 128 --calls 30}"
      step timeout 150 python3 scripts/gpu/probe/ceiling.py "${ceiling_args[@]}" --out "$latest/ceiling.md" \
        --json "$latest/ceiling.json" ;;
    bench)
      say "full bench into $latest"
      read -ra bench_args <<<"${BENCH_ARGS:-}"  # none: bench.sh's full measurement
      ceiling=
      [ -f "$latest/ceiling.json" ] && ceiling=$latest/ceiling.json
      OUT=$latest CEILING=$ceiling BENCH_TIMEOUT=${BENCH_TIMEOUT:-330} step bash scripts/gpu/bench.sh -- "${bench_args[@]}"
      mv -f "$latest/nvidia-smi.txt" "$latest/bench.log" "$latest/tritonserver.log" "$OUT/more/" 2>/dev/null
      gzip -f "$latest/bench.json" ;;
    ab)
      say "A/B: .ab-before against this tree at levels ${AB_LEVELS:-1 256}"
      read -ra ab_args <<<"${AB_ARGS:---concurrency ${AB_LEVELS:-1 256} --seconds ${AB_SECONDS:-6} --grace 15 --warmup 3 --baseline-device none}"
      OUT=$OUT/ab AB_ORDER=${AB_ORDER:-before after after before} AB_TIMEOUT=${AB_TIMEOUT:-70} \
        step bash scripts/gpu/ab-bench.sh .ab-before -- "${ab_args[@]}"
      for run in "$OUT"/ab/*/; do  # each run's report and numbers, packed
        [ -f "$run/bench.json" ] && gzip -f "$run/bench.json"
        rm -f "$run"/{nvidia-smi.txt,concurrency.png,tritonserver.log}
      done
      mkdir -p "$OUT/more/ab" && for run in "$OUT"/ab/*/; do mv "$run" "$OUT/more/ab/"; done ;;
    cancel)
      host_env
      say "cancel stress (grpc-cancel, 45 s)"
      step timeout 150 python3 tests/served/test_cancel_stress.py --mode grpc-cancel --seconds 45 \
        >"$OUT/more/cancel-stress.json" 2>"$OUT/more/cancel-stress.log" ;;
    gateway)
      host_env
      say "gateway: 1 and ${GATEWAY_REPLICAS:-4} processes at ${GATEWAY_STREAMS:-64 256} streams"
      read -ra gateway_args <<<"${GATEWAY_ARGS:---target torch-cuda --requests 20 --stream-requests 2048}"
      # shellcheck disable=SC2086  # the levels are words
      step timeout 420 python3 -m tts_triton.cli bench-gateway "${gateway_args[@]}" --gateways 1 ${GATEWAY_REPLICAS:-4} \
        --streams ${GATEWAY_STREAMS:-64 256} --out "$OUT/more/gateway" ;;
    profile)
      host_env
      say "py-spy on every Python process of the server at ${PROFILE_LEVEL:-128} streams"
      pyspy=$(command -v py-spy || true)
      if [ -z "$pyspy" ] && compgen -G ".whl/py_spy-*.whl" >/dev/null; then
        python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/pyspy .whl/py_spy-*.whl
        pyspy=/tmp/pyspy/bin/py-spy
      fi
      read -ra profile_args <<<"${PROFILE_ARGS:---target torch-cuda --baseline-device none --warmup 3}"
      command -v nvidia-cuda-mps-control >/dev/null 2>&1 && profile_args+=(--mps)  # as bench.sh serves
      profile=$OUT/more/profile
      mkdir -p "$profile"
      python3 -m tts_triton.cli bench "${profile_args[@]}" --concurrency "${PROFILE_LEVEL:-128}" --seconds 30 \
        --grace 20 --out "$profile/bench" >"$profile/bench.log" 2>&1 &
      bench=$!
      until grep -q "level c=" "$profile/bench.log" 2>/dev/null; do kill -0 "$bench" 2>/dev/null || break; sleep 1; done
      sleep 5  # the level's opening burst passes
      server=$(pgrep -P "$bench" -x tritonserver | head -1)
      step python3 scripts/gpu/probe/hot_paths.py record --server "${server:-0}" --seconds 15 --out "$profile" \
        --py-spy "${pyspy:-py-spy}"
      step wait "$bench"
      step python3 scripts/gpu/probe/hot_paths.py summary "$profile" --out "$profile/summary.md" >/dev/null ;;
    *) echo "serving-check.sh: unknown step '$name' (ceiling, bench, ab, cancel, gateway, profile)" >&2; exit 2 ;;
  esac
done
say "exit status $status"
(cd "$OUT" && tar -czf more.tar.gz more && rm -rf more)
say "results: $(cd "$OUT" && find . -type f | sort | tr '\n' ' ')"
exit "$status"
