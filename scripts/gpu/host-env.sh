# Sourced by the GPU host's serving scripts (bench.sh, with-server.sh), from the project root: Triton, numpy 1.26
# and tritonclient from the bundle (gpu-env.sh, which exports TRITON_HOME), espeak-ng from the Debian packages
# (espeak-env.sh, unless one is on PATH), then this checkout made importable (checkout-path.sh) and checked.
# Environment: GPU_BUNDLE (.gpu-bundle; none: python3 on PATH already is the environment, e.g. on a CPU host),
# ESPEAK_DEBS (.espeak-debs).
if [ "${GPU_BUNDLE:-}" != none ]; then
  echo "==> gpu-env (${GPU_BUNDLE:-.gpu-bundle})"
  # shellcheck source=gpu-env.sh
  source scripts/gpu/gpu-env.sh "${GPU_BUNDLE:-.gpu-bundle}"
fi
if ! command -v espeak-ng >/dev/null 2>&1; then
  echo "==> espeak-ng from ${ESPEAK_DEBS:-.espeak-debs}"
  # shellcheck source=espeak-env.sh
  source scripts/gpu/espeak-env.sh "${ESPEAK_DEBS:-.espeak-debs}"
fi
scripts/gpu/checkout-path.sh
python3 -c 'import matplotlib, soundfile, tritonclient.grpc.aio, tts_triton.client, tts_triton.export.repository' || {
  echo "host-env.sh: a module above is missing; soundfile comes with the bundle when it is made with" \
       "BUNDLE_EXTRA_WHEELS=\"soundfile cffi\" (see scripts/gpu/README.md)" >&2; return 2; }
