# GPU run 5 (issue 12, session 7): where the vocoder's time goes (in process), then the default torch-cuda
# repository with the CUDA Multi-Process Service (MPS) on, so that the four model processes' kernels can overlap
# instead of time-slicing the GPU; same short sweep as run 4's variants, default and 2 decoder instances.
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/lib.sh
timeout 150 python3 scripts/gpu/probe/vocoder.py 2>&1 | grep -v Warning | tee $OUT/vocoder.txt | tail -45
which nvidia-cuda-mps-control nvidia-smi; nvidia-smi -q | grep -i "compute mode"
mps_on && echo "MPS daemon started" || echo "MPS daemon failed"
build --out /tmp/repo
source scripts/gpu/probe/start.sh /tmp/repo 8000
echo get_server_list | nvidia-cuda-mps-control; cat /tmp/mps-log/control.log 2>/dev/null | tail -5
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
bench 120 --concurrency 1 64 128 256 --seconds 6 --baseline-device none --out $OUT/mps.md --plot /tmp/mps.png --json /tmp/mps.json
stop
echo "=== MPS, 2 decoder instances, 4 BLS ($SECONDS s)"
build --out /tmp/repo2 --instances decoder=2 --bls-instances 4
source scripts/gpu/probe/start.sh /tmp/repo2 8000
bench 100 --concurrency 1 64 256 --seconds 6 --baseline-device none --out $OUT/mps-dec2.md --plot /tmp/m2.png --json /tmp/m2.json
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
stop
mps_off
echo "done after $SECONDS s"
