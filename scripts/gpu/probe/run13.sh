# GPU run 13 (issue 12, session 8): each network process's GPU memory and graph replay time with torch's default
# cuBLAS workspace and with one 4 MiB workspace (CUBLAS_WORKSPACE_CONFIG=:4096:1), in process, no MPS, at run 10's
# batch sizes (decoder 128, text encoder 32, vocoder 64 rows).
set -u
cd "$(dirname "$0")/../../.."
source scripts/gpu/probe/lib.sh
for setting in "decoder 128 16" "text_encoder 32" "vocoder 64"; do
  for workspace in default :4096:1; do
    if [ $workspace = default ]; then unset CUBLAS_WORKSPACE_CONFIG; else export CUBLAS_WORKSPACE_CONFIG=$workspace; fi
    timeout 60 python3 scripts/gpu/probe/memory.py $setting 2>&1 | grep -v Warning | tee -a $OUT/workspace.txt
  done
done
echo "done after $SECONDS s"
