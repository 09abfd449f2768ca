# GPU run 3 (issue 12, session 7): the torch-cuda repository with ragged batches, token padding across buckets
# and no queue delays; per-process GPU memory; the sweep 1..256 with the eager baseline and a 2000-request soak;
# then two variants (K=16 steps per call; 2 decoder instances + 4 BLS instances), shorter sweeps.
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/lib.sh

served_sweep

variant k16.md --steps-per-call 16
variant dec2.md --instances decoder=2 --bls-instances 4
echo "done after $SECONDS s"
