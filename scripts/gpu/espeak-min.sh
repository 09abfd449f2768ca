#!/usr/bin/env bash
# Pack the espeak-ng packages of espeak-bundle.sh as one small archive for the GPU probe runs
# (scripts/gpu/espeak-env.sh unpacks it: ESPEAK_DEBS=.espeak-min for bench.sh and with-server.sh): the packages' files, without documentation and without the
# dictionaries of languages other than English and Mandarin.
# Usage, from the project root after scripts/gpu/espeak-bundle.sh:  scripts/gpu/espeak-min.sh [DEBS_DIR]
set -euo pipefail
debs=${1:-.espeak-debs}
root=$(mktemp -d)
for deb in "$debs"/*.deb; do
  case $(basename "$deb") in fest* | flite* | libflite* | libestools*) continue ;; esac  # corpus teachers only
  dpkg-deb -x "$deb" "$root"
done
find "$root" -name '*_dict' ! -name en_dict ! -name cmn_dict -delete
rm -rf "$root/usr/share/doc" "$root/usr/share/man"
mkdir -p .espeak-min
tar -C "$root" -cJf .espeak-min/espeak-root.tar.xz .
rm -rf "$root"
echo "wrote .espeak-min/espeak-root.tar.xz ($(du -h .espeak-min/espeak-root.tar.xz | cut -f1))"
