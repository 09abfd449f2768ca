#!/usr/bin/env bash
# Download the corpus teachers, espeak-ng, flite, festival (with its HTS slt voice and the lexicons it reads) and
# hts_engine (which renders festival's HTS labels under the engine's own prosody controls),
# and every shared library they load as Debian packages, and
# libjemalloc2 (tritonserver's allocator, tts_triton.processes.memory, found there on LD_LIBRARY_PATH), for a host that has
# none of them and no network (the GPU host). scripts/gpu/espeak-env.sh unpacks them there.
#
# Usage, from the project root on a Debian/Ubuntu machine with espeak-ng, flite, festival and htsengine installed:
#     scripts/gpu/espeak-bundle.sh [OUT_DIR]        # OUT_DIR defaults to .espeak-debs (git-ignored)
#
# The package list is the closure that the dynamic linker actually loads (ldd of espeak-ng, of
# libespeak-ng.so.1, which the text front end opens through ctypes, of flite, festival and hts_engine), plus the data
# packages
# espeak-ng-data, festvox-us-slt-hts, festlex-cmu and festlex-poslex. That is
# smaller than `apt-cache depends --recurse`, which also pulls data, config and daemon packages that
# nothing loads. glibc is left out: every host has a newer one. Each package is downloaded at the
# version installed here when the archive still has it, so the bundle is what runs here.
set -euo pipefail
out=${1:-.espeak-debs}
bin=$(command -v espeak-ng) || { echo "espeak-ng is not installed here (apt-get install espeak-ng)" >&2; exit 1; }
lib=$(ldd "$bin" | awk '$1 == "libespeak-ng.so.1" {print $3}')
flite=$(command -v flite) || { echo "flite is not installed here (apt-get install flite)" >&2; exit 1; }
festival=$(command -v festival) || { echo "festival is not installed here (apt-get install festival festvox-us-slt-hts)" >&2
                                     exit 1; }
hts_engine=$(command -v hts_engine) || { echo "hts_engine is not installed here (apt-get install htsengine)" >&2; exit 1; }

owner() {  # package (with :arch) owning the file, trying the usrmerge twin path too
  local path=$1 alt
  case $path in /usr/*) alt=${path#/usr} ;; *) alt=/usr$path ;; esac
  { dpkg-query -S "$path" 2>/dev/null || dpkg-query -S "$alt" 2>/dev/null; } | head -n1 | sed 's/: \/.*//'
}

mapfile -t files < <({ echo "$bin"; echo "$flite"; echo "$festival"; echo "$hts_engine"
                      ldd "$bin" "$lib" "$flite" "$festival" "$hts_engine" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'; } | sort -u)
packages=("espeak-ng-data" "libjemalloc2" "festvox-us-slt-hts" "festlex-cmu" "festlex-poslex")
for f in "${files[@]}"; do
  pkg=$(owner "$(readlink -f "$f")")
  [ -n "$pkg" ] || pkg=$(owner "$f")
  [ -n "$pkg" ] || { echo "no package owns $f" >&2; exit 1; }
  case ${pkg%%:*} in libc6) continue ;; esac
  packages+=("$pkg")
done
mapfile -t packages < <(printf '%s\n' "${packages[@]}" | sort -u)

rm -rf "$out" && mkdir -p "$out"
for pkg in "${packages[@]}"; do
  version=$(dpkg-query -W -f='${Version}' "$pkg")
  # the installed version, else (no longer in the archive) the candidate one
  (cd "$out" && { apt-get download -q "$pkg=$version" || apt-get download -q "$pkg"; } 2>&1 >/dev/null \
     | { grep -v -e unsandboxed -e "Can't find a source" || true; } >&2)
done
ls "$out"/*.deb | wc -l | xargs echo "packages:"
du -sh "$out"
