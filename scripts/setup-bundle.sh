#!/usr/bin/env bash
# .venv for a host with no package index whose python3 holds a CUDA build of PyTorch (a GPU host), made from
# a carried bundle instead of pip (scripts/gpu/README.md says how the bundle is made):
#   BUNDLE/triton.tar.xz   the Triton server of nvidia-pytriton (bin/, backends/python/, stub/, libs/, caches/)
#   BUNDLE/site.tar.xz     site/: numpy 1.26 (the Python stubs need numpy < 2), tritonclient, soundfile, ...
#   .espeak-min/espeak-root.tar.xz   espeak-ng, unpacked only when the host has none
# setup.sh runs this when BUNDLE exists and its python3's torch is a CUDA build; usage: bash scripts/setup-bundle.sh
# BUNDLE. The venv sees the host python3's packages (its torch) behind its own (numpy 1.26 first), imports this checkout
# (scripts/gpu/checkout-path.sh), and .venv/bin/tts-triton runs the CLI with TRITON_HOME=.venv/triton, libpython
# and espeak-ng where the server's Python stubs find them. A re-run with nothing changed takes a second.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bundle=${1:?usage: setup-bundle.sh BUNDLE_DIR}
PYTHON=${PYTHON:-python3}
VENV=.venv
root=$PWD
FINGERPRINT=$VENV/.setup-fingerprint
start=$SECONDS
step() { printf '==> [%3ds] %s\n' "$((SECONDS - start))" "$*"; }
fingerprint() {
  { "$PYTHON" --version; ls -l "$bundle"/*.tar.xz .espeak-min/*.tar.xz 2>/dev/null || true
    cat scripts/setup-bundle.sh scripts/gpu/checkout-path.sh; } 2>&1 | sha256sum | cut -d' ' -f1
}
if [[ -f $FINGERPRINT && $(<"$FINGERPRINT") == "$(fingerprint)" ]]; then
  step "$VENV is up to date (from $bundle)"
  exit 0
fi

step "creating $VENV over $("$PYTHON" -c 'import sys, torch; print(sys.executable, "with torch", torch.__version__)')"
rm -rf "$VENV"
"$PYTHON" -m venv --without-pip "$VENV"
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# The host's packages after the venv's own: python3 may itself be a venv, whose packages --system-site-packages
# would not reach.
"$PYTHON" -c 'import site; print("\n".join(site.getsitepackages()))' >"$site/zz_host_site.pth"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
step "unpacking $bundle/site.tar.xz into $site"
tar -C "$work" -xJf "$bundle/site.tar.xz"
cp -r "$work/site/." "$site/"
step "unpacking $bundle/triton.tar.xz into $VENV/triton"
tar -C "$VENV" -xJf "$bundle/triton.tar.xz"
# The stub loads libpython from LD_LIBRARY_PATH: link only it (the interpreter's whole LIBDIR, a system folder
# on such hosts, would put a system cuDNN in front of PyTorch's own).
mkdir -p "$VENV/pylib"
ln -sf "$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')"/libpython3*.so* "$VENV/pylib/"
libs=$root/$VENV/pylib
espeak_env=""
if ! command -v espeak-ng >/dev/null 2>&1 && [[ -f .espeak-min/espeak-root.tar.xz ]]; then
  step "unpacking espeak-ng from .espeak-min"
  mkdir -p "$VENV/espeak-root"
  tar -C "$VENV/espeak-root" -xJf .espeak-min/espeak-root.tar.xz
  host_libs=$(ldconfig -p 2>/dev/null || true)
  for d in "$VENV"/espeak-root/usr/lib/x86_64-linux-gnu "$VENV"/espeak-root/lib/x86_64-linux-gnu \
           "$VENV"/espeak-root/usr/lib/x86_64-linux-gnu/pulseaudio; do
    [[ -d $d ]] || continue
    for so in "$d"/*.so*; do  # the host's own copies win: only what it lacks stays on the library path
      [[ -e $so ]] || continue
      case $(basename "$so") in libespeak-ng.so*) continue ;; esac
      if [[ -n $host_libs ]] && grep -qF " $(basename "$so") (" <<<"$host_libs"; then rm -f "$so"; fi
    done
    libs=$libs:$root/$d
  done
  espeak_env="export PATH=$root/$VENV/espeak-root/usr/bin:\$PATH ESPEAK_DATA_PATH=$root/$VENV/espeak-root/usr/lib/x86_64-linux-gnu"
elif ! command -v espeak-ng >/dev/null 2>&1; then
  echo "setup-bundle.sh: WARNING: no espeak-ng here and no .espeak-min/espeak-root.tar.xz: the text front end needs it" >&2
fi
PATH=$root/$VENV/bin:$PATH bash scripts/gpu/checkout-path.sh "$site"
cat >"$VENV/bin/tts-triton" <<SH
#!/usr/bin/env bash
# tts-triton from this checkout, with the carried Triton server, libpython and espeak-ng (written by setup-bundle.sh).
export TRITON_HOME=\${TRITON_HOME:-$root/$VENV/triton}
export LD_LIBRARY_PATH=$libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
$espeak_env
exec "$root/$VENV/bin/python" -m tts_triton.cli "\$@"
SH
chmod +x "$VENV/bin/tts-triton"
"$VENV/bin/python" -c 'import numpy, torch, tritonclient.grpc, soundfile, tts_triton.cli
print("setup-bundle: numpy", numpy.__version__, "torch", torch.__version__, "CUDA", torch.cuda.is_available())'
fingerprint >"$FINGERPRINT"
step "done"
