#!/usr/bin/env bash
# Headless Locust run of loadtest/locustfile.py, then the PNG report.
#
#   loadtest/run.sh USERS SPAWN_RATE DURATION [OUT_DIR]
#   TTS_HOST=grpc://gpu-host:8001 loadtest/run.sh 32 4 5m
#
# DURATION is Locust's --run-time (30s, 5m, 1h). OUT_DIR defaults to runs/loadtest/<timestamp>
# and receives locust_*.csv (stats, history, failures), report.html, locust.log, the locustfile's
# exact per-request records (requests*.csv, latency_percentiles*.csv) and report.png.
# Environment: TTS_HOST (default grpc://localhost:8001), PYTHON (default python3), and the
# locustfile's TTS_* variables. Exits with Locust's status (1 when any request failed).
set -euo pipefail

if [[ $# -lt 3 || $# -gt 4 ]]; then
  sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
users=$1 spawn_rate=$2 duration=$3
out=${4:-runs/loadtest/$(date +%Y%m%d-%H%M%S)}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=${PYTHON:-python3}

mkdir -p "$out"
export TTS_RESULTS_DIR=$out
status=0
"$python" -m locust -f "$here/locustfile.py" --headless \
  --users "$users" --spawn-rate "$spawn_rate" --run-time "$duration" \
  --host "${TTS_HOST:-grpc://localhost:8001}" --stop-timeout 30 \
  --csv "$out/locust" --csv-full-history --html "$out/report.html" \
  --logfile "$out/locust.log" || status=$?
"$python" "$here/report.py" "$out"
exit "$status"
