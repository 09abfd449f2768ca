#!/usr/bin/env bash
# Headless Locust run of loadtest/locustfile.py, then the PNG report: `tts-triton loadtest` with this
# checkout's interpreter (.venv, else the tts-triton on PATH), so Locust need not be on the system python.
#
#   loadtest/run.sh USERS SPAWN_RATE DURATION [OUT_DIR]
#   TTS_HOST=grpc://gpu-host:8001 loadtest/run.sh 32 4 5m
#
# DURATION is Locust's --run-time (30s, 5m, 1h). OUT_DIR defaults to runs/loadtest/<timestamp>.
# Environment: TTS_HOST (default grpc://localhost:8001) and the locustfile's TTS_* variables.
# Exits with Locust's status (1 when any request failed).
set -euo pipefail

if [[ $# -lt 3 || $# -gt 4 ]]; then
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cli=$here/../.venv/bin/tts-triton
[[ -x $cli ]] || cli=$(command -v tts-triton) || { echo "run.sh: no .venv (bash scripts/setup.sh) and no tts-triton on PATH" >&2; exit 1; }
args=(--users "$1" --spawn-rate "$2" --duration "$3" --url "${TTS_HOST:-grpc://localhost:8001}")
[[ $# -eq 4 ]] && args+=(--out "$4")
exec "$cli" loadtest "${args[@]}"
