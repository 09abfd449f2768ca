#!/usr/bin/env bash
# From a fresh clone to audio: set up, start the embedded Triton server on loopback (building the model
# repository on first use), speak a sentence into hello.wav over the gRPC stream, stop the server, exit 0.
# Usage: bash scripts/quickstart.sh ["Text to speak."] [tts-triton serve options, e.g. --grpc-port 9001]
# Ctrl-C, SIGTERM or closing the terminal stop the server too; its log is printed if it fails to start.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
text=${1:-"Hello! This is tts-triton, streaming speech from a Triton server."}
(($#)) && shift

bash scripts/setup.sh
log=$(mktemp -t tts-triton-serve.XXXXXX.log)
.venv/bin/tts-triton serve --exit-with-parent $$ "$@" >"$log" 2>&1 &
server=$!
# `serve` stops tritonserver (SIGTERM, then SIGKILL after a grace period) when it gets SIGTERM, which the
# kernel also sends it if this script dies without running its traps (--exit-with-parent).
stop() { kill -TERM "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; }
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
echo "==> starting the server (builds the model repository on first use; log: $log)"
url=
until [[ -n $url ]]; do
  if ! kill -0 "$server" 2>/dev/null; then
    cat "$log" >&2
    exit 1
  fi
  sleep 1
  url=$(sed -n 's/^ready: gRPC \([^ ]*\) .*/\1/p' "$log")
done
echo "==> ready on $url"
.venv/bin/tts-triton voices --url "$url"
.venv/bin/tts-triton say "$text" -o hello.wav --url "$url"
