# GPU run 15 (issue 12, session 8): a batch-1 network call in process, graph replay alone against the whole
# StageRunner.run, without and with MPS (scripts/gpu/probe/overhead.py).
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/lib.sh
timeout 80 python3 scripts/gpu/probe/overhead.py "no MPS" 2>&1 | grep -v Warning | tee -a $OUT/overhead.txt
mps_on
timeout 80 python3 scripts/gpu/probe/overhead.py "MPS" 2>&1 | grep -v Warning | tee -a $OUT/overhead.txt
mps_off
echo "done after $SECONDS s"
