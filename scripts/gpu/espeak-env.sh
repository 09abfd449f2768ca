# Source this on a host without espeak-ng (the GPU host), from the project root, after sending the
# folder that scripts/gpu/espeak-bundle.sh wrote:
#     source scripts/gpu/espeak-env.sh [DEBS_DIR]          # DEBS_DIR defaults to .espeak-debs
# It unpacks every .deb (and espeak-min.sh's espeak-root.tar.xz) into ESPEAK_ROOT (default /tmp/espeak-root; never into /) and exports PATH,
# LD_LIBRARY_PATH and ESPEAK_DATA_PATH so that `espeak-ng` and libespeak-ng.so.1 (loaded by the text
# front end) run from there, and festival's FESTLIBDIR and FESTDATADIR when the bundle has festival. Libraries the host already has (per `ldconfig -p`) are deleted from the
# unpacked tree first, so LD_LIBRARY_PATH adds only missing ones and shadows nothing of the host's
# (its PyTorch included). ESPEAK_KEEP_HOST_LIBS=1 keeps them all (to test the bundle on a host that has
# espeak-ng). Needs dpkg-deb or, without it, python3 (for .deb files whose data is tar.xz/gz/bz2).
espeak_debs=${1:-.espeak-debs}
export ESPEAK_ROOT=${ESPEAK_ROOT:-/tmp/espeak-root}
mkdir -p "$ESPEAK_ROOT"
for tarball in "$espeak_debs"/espeak-root.tar.xz; do  # espeak-min.sh's archive: the packages' files, unpacked
  [ -e "$tarball" ] && tar -C "$ESPEAK_ROOT" -xJf "$tarball"
done
for deb in "$espeak_debs"/*.deb; do
  [ -e "$deb" ] || continue
  if command -v dpkg-deb >/dev/null 2>&1; then
    dpkg-deb -x "$deb" "$ESPEAK_ROOT"
  else
    python3 - "$deb" "$ESPEAK_ROOT" <<'PY'
import io, sys, tarfile
deb, root = sys.argv[1], sys.argv[2]
data = open(deb, "rb").read()
pos = 8  # "!<arch>\n", then 60-byte member headers
while pos < len(data):
    name, size = data[pos:pos + 16].decode().strip().rstrip("/"), int(data[pos + 48:pos + 58])
    if name.startswith("data.tar"):
        with tarfile.open(fileobj=io.BytesIO(data[pos + 60:pos + 60 + size])) as tar:
            tar.extractall(root)
        break
    pos += 60 + size + (size & 1)
else:
    sys.exit(f"{deb}: no data.tar member")
PY
  fi
done
espeak_libdirs=""
for d in "$ESPEAK_ROOT"/usr/lib/x86_64-linux-gnu "$ESPEAK_ROOT"/lib/x86_64-linux-gnu \
         "$ESPEAK_ROOT"/usr/lib/x86_64-linux-gnu/pulseaudio; do
  [ -d "$d" ] || continue
  espeak_libdirs=$espeak_libdirs${espeak_libdirs:+:}$d
  if [ "${ESPEAK_KEEP_HOST_LIBS:-0}" != 1 ] && host_libs=$(ldconfig -p 2>/dev/null) && [ -n "$host_libs" ]; then
    for so in "$d"/*.so*; do
      [ -e "$so" ] || continue
      case $(basename "$so") in libespeak-ng.so*) continue ;; esac
      if grep -qF " $(basename "$so") (" <<<"$host_libs"; then rm -f "$so"; fi
    done
  fi
done
export PATH=$ESPEAK_ROOT/usr/bin:$PATH
if [ -d "$ESPEAK_ROOT/usr/share/festival" ]; then  # festival looks for its Scheme, lexicons and voices here
  export FESTLIBDIR=$ESPEAK_ROOT/usr/share/festival FESTDATADIR=$ESPEAK_ROOT/usr/share/festival
fi
export LD_LIBRARY_PATH=$espeak_libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export ESPEAK_DATA_PATH=$ESPEAK_ROOT/usr/lib/x86_64-linux-gnu  # the folder holding espeak-ng-data/
unset espeak_debs espeak_libdirs host_libs d deb so tarball
hash -r
espeak-ng --version
