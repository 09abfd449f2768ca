#!/usr/bin/env bash
# From a fresh clone to audio: set up, build the model repository, start the embedded Triton server
# on loopback, speak a sentence into hello.wav over the gRPC stream, stop the server.
# Usage: bash scripts/quickstart.sh ["Text to speak."]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
text=${1:-"Hello! This is tts-triton, streaming speech from a Triton server."}

bash scripts/setup.sh
log=$(mktemp -t tts-triton-serve.XXXXXX.log)
.venv/bin/tts-triton serve >"$log" 2>&1 &
server=$!
trap 'kill -INT $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
echo "==> starting the server (building model_repository/ on first use; log: $log)"
until grep -q '^ready:' "$log"; do
  kill -0 $server 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 1
done
.venv/bin/tts-triton voices
.venv/bin/tts-triton say "$text" -o hello.wav
