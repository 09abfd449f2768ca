# Source from the project root on the GPU host: Triton bundle env, espeak-ng, the project importable by the stubs.
export PYTHONSAFEPATH=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
ROOT=$PWD
source scripts/gpu/gpu-env.sh .gpu-bundle
mkdir -p /tmp/espeak-root && tar -C /tmp/espeak-root -xJf .espeak-min/espeak-root.tar.xz
host_libs=$(ldconfig -p 2>/dev/null)
for d in /tmp/espeak-root/usr/lib/x86_64-linux-gnu /tmp/espeak-root/lib/x86_64-linux-gnu /tmp/espeak-root/usr/lib/x86_64-linux-gnu/pulseaudio; do
  [ -d "$d" ] || continue
  for so in "$d"/*.so*; do
    [ -e "$so" ] || continue
    case $(basename "$so") in libespeak-ng.so*) continue ;; esac
    if grep -qF " $(basename "$so") (" <<<"$host_libs"; then rm -f "$so"; fi
  done
  export LD_LIBRARY_PATH=$d:$LD_LIBRARY_PATH
done
export ESPEAK_DATA_PATH=/tmp/espeak-root/usr/lib/x86_64-linux-gnu
# the package as setup.py maps it: tts_triton/ with client/ and export/ inside
mkdir -p /tmp/pkgroot/tts_triton
for f in "$ROOT"/tts_triton/*; do ln -sfn "$f" /tmp/pkgroot/tts_triton/; done
ln -sfn "$ROOT/client" /tmp/pkgroot/tts_triton/client; ln -sfn "$ROOT/export" /tmp/pkgroot/tts_triton/export
echo /tmp/pkgroot > "$(ls -d /tmp/tritonenv/lib/python3*/site-packages)/zz_project.pth"
python3 -c "import tts_triton.client, tts_triton.export.repository, tts_triton.text as t; print('g2p', t.text_to_sequences('Hello there.'))"
