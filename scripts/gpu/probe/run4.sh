# GPU run 4 (issue 12, session 7): run 3 plus the packed decoder state, the 24/48/72/96-frame vocoder windows,
# K=16 by default and the style encoder on the CPU; per-process GPU memory; the sweep 1..256 with the eager baseline
# and a 2000-request soak; then two variants (2 decoder instances + 4 BLS; also 2 vocoder instances), shorter sweeps.
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/lib.sh

served_sweep

variant dec2.md --instances decoder=2 --bls-instances 4
variant dec2voc2.md --instances decoder=2 --instances vocoder=2 --bls-instances 4
echo "done after $SECONDS s"
