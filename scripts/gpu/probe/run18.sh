# GPU run 18 (issue 12, session 9): run 15's in-process batch-1 calls again, each StageRunner.run also timed after
# 5 ms idle (does an idle host and GPU explain why a call runs slower inside Triton than back to back?).
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/lib.sh
timeout 80 python3 scripts/gpu/probe/overhead.py "no MPS" 2>&1 | grep -v Warning | tee -a $OUT/overhead.txt
mps_on
timeout 80 python3 scripts/gpu/probe/overhead.py "MPS" 2>&1 | grep -v Warning | tee -a $OUT/overhead.txt
mps_off
echo "done after $SECONDS s"
