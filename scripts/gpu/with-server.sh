#!/usr/bin/env bash
# One command against this checkout's server on the GPU host, in one call (e.g. a probe of scripts/gpu/probe/):
#     scripts/gpu/with-server.sh COMMAND [ARGS...]
#     scripts/gpu/with-server.sh python3 scripts/gpu/probe/voice.py --voice slt --sentences 8
# Sets up the host as bench.sh does (host-env.sh), starts `tts-triton serve --target torch-cuda` (--mps where MPS
# is installed, then SERVE_ARGS) on the default ports, which the probes and clients default to, waits until it
# is ready, runs COMMAND, and stops the server (also when COMMAND fails or the script is interrupted).
# The server's console goes to $OUT/serve.log. Exit status: COMMAND's, or 1 when the server failed to start.
# Environment: OUT (default runs/out), TARGET (torch-cuda), SERVE_ARGS (more flags of serve), and those of
# host-env.sh (GPU_BUNDLE, ESPEAK_DEBS).
set -eo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
(($#)) || { echo "usage: scripts/gpu/with-server.sh COMMAND [ARGS...]" >&2; exit 2; }
OUT=${OUT:-runs/out}
mkdir -p "$OUT"
say() { printf '==> [%4ds] %s\n' "$SECONDS" "$*"; }
# shellcheck source=host-env.sh
source scripts/gpu/host-env.sh
mps=()
command -v nvidia-cuda-mps-control >/dev/null 2>&1 && mps=(--mps)  # the GPU host's driver tools; a CPU host has none
# shellcheck disable=SC2086  # the extra flags are meant to split
PYTHONUNBUFFERED=1 python3 -m tts_triton.cli serve --target "${TARGET:-torch-cuda}" "${mps[@]}" --exit-with-parent $$ \
  ${SERVE_ARGS:-} >"$OUT/serve.log" 2>&1 &
server=$!
stop() { kill -TERM "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; }
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
say "starting the server (log: $OUT/serve.log)"
until grep -q '^ready: ' "$OUT/serve.log"; do
  kill -0 "$server" 2>/dev/null || { cat "$OUT/serve.log" >&2; say "the server failed to start"; exit 1; }
  sleep 1
done
say "$(grep -m1 '^ready: ' "$OUT/serve.log")"
status=0
"$@" || status=$?
say "exit status $status"
exit "$status"
