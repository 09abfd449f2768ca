#!/usr/bin/env bash
# The stream-input WebSocket on the GPU host, in one call: time from the first sentence's end to its first audio,
# and sessions within 0.5 s at p95 (issue 35). Sets up the host and serves as with-server.sh does, starts the
# gateway on port 8080 in front of that server, runs `tts-triton bench-stream` at SESSIONS, stops both.
#     OUT=/path/to/results ESPEAK_DEBS=.espeak-min scripts/gpu/stream-input.sh
# The bundle needs the gateway's packages: BUNDLE_EXTRA_WHEELS="soundfile cffi pycparser defusedxml starlette
# uvicorn h11 click websockets prometheus-client soxr anyio sniffio idna typing-extensions" (scripts/gpu/README.md).
# Environment: OUT (default runs/out), SESSIONS (1,16,64,128,256), and those of with-server.sh.
set -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export OUT=${OUT:-runs/out}
bench_behind_gateway() {
  python3 -m tts_triton.cli gateway --triton-url localhost:8001 --port 8080 --max-sessions 512 \
    --max-sessions-per-key 512 --max-streams 512 >"$OUT/gateway.log" 2>&1 &
  local gateway=$! status
  python3 -c 'import time, urllib.request
for _ in range(120):
    try:
        urllib.request.urlopen("http://localhost:8080/readyz", timeout=2)
        break
    except OSError:
        time.sleep(0.5)'
  python3 -m tts_triton.cli bench-stream --gateway ws://localhost:8080 --triton localhost:8001 \
    --sessions "${SESSIONS:-1,16,64,128,256}" --out "$OUT/stream"
  status=$?
  kill "$gateway"
  wait "$gateway"
  return "$status"
}
export -f bench_behind_gateway
scripts/gpu/with-server.sh bash -c bench_behind_gateway
