#!/usr/bin/env bash
# Render the training corpus on the GPU host (no espeak-ng, flite or festival, no network), from the project root:
#     scripts/gpu/build-corpus.sh OUT_DIR [options of `python -m tts_triton.data.corpus build`]
# Needs .espeak-debs/ (scripts/gpu/espeak-bundle.sh, run here) sent along; ESPEAK_DEBS overrides its path.
# The host's python3 is enough: the corpus code needs numpy only (torch for the datasets).
set -euo pipefail
{ command -v espeak-ng && command -v flite && command -v festival; } >/dev/null 2>&1 ||
  source scripts/gpu/espeak-env.sh "${ESPEAK_DEBS:-.espeak-debs}" >/dev/null
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
python3 -m tts_triton.data.sentences --count 0 >/dev/null  # fails fast when the package does not import
exec python3 -m tts_triton.data.corpus build --out "$1" "${@:2}"
