#!/usr/bin/env bash
# Set up this project on a Debian machine, idempotently; a re-run with everything present takes a second.
# Two installs: the default serves (tts-triton serve, the gateway, the quickstart: the model stack, the embedded
# Triton, the gateway's packages); --test adds what the test suite, the load test and the evaluation need (pytest,
# the evaluation's judges and their models, locust, schemathesis; redis-server, flite, festival). scripts/test.sh
# runs the second.
#   1. Debian packages needed at run time (serving: espeak-ng, libsndfile1, libjemalloc2; --test: redis-server,
#      flite, festival, festvox-us-slt-hts, htsengine; python3-venv when venv is unusable),
#      installed only when missing, and only as root or with password-less sudo (else a warning); apt waits
#      up to APT_LOCK_TIMEOUT seconds (default 300) for a lock another apt/dpkg holds;
#   2. .venv, made with the machine's python3 (3.11);
#   3. torch 2.13.0 first (a CPU build from this machine's disk; a plain `torch` would pull a CUDA build
#      of several GB), then this package, editable, with the install's extras; skipped when .venv was already
#      set up for that install (or, for serving, the test install, which holds it) from the same python3,
#      pyproject.toml's package metadata and setup.sh (remove .venv/.setup-fingerprint to force).
# Usage: bash scripts/setup.sh [--test]    (from any directory; PYTHON=... picks another interpreter)
#        bash scripts/setup.sh --check [--test]    (exit 0 when .venv is up to date for that install, 1 when a run
#        would change it)
# When python3 already holds a CUDA build of PyTorch (a GPU host), .venv sees the host's packages behind its own
# and torch is not installed; without a package index there, .venv comes from a carried bundle (see below).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON=${PYTHON:-python3}
VENV=.venv
TORCH_VERSION=2.13.0
check=false
install=serve
for arg in "$@"; do
  case $arg in
    --check) check=true ;;
    --test) install=test ;;
    *) echo "setup.sh: unknown argument $arg (usage: setup.sh [--check] [--test])" >&2; exit 2 ;;
  esac
done
SERVE_EXTRAS=model,serve,gateway
TEST_EXTRAS=$SERVE_EXTRAS,dev,loadtest,eval
if [[ $install == test ]]; then EXTRAS=$TEST_EXTRAS; else EXTRAS=$SERVE_EXTRAS; fi
FINGERPRINT=$VENV/.setup-fingerprint

trap 'echo "setup.sh: FAILED at line $LINENO: $BASH_COMMAND" >&2' ERR
start=$SECONDS
step() { printf '==> [%3ds] %s\n' "$((SECONDS - start))" "$*"; }
pip() {  # progress lines kept (a first install takes minutes); drops warnings about local package indexes
  # that this machine's pip config names but lacks, and pip's "Requirement already satisfied" noise
  "$VENV/bin/python" -m pip --disable-pip-version-check "$@" 2>&1 |
    { grep -v -e 'is ignored: it is neither a file nor a directory' -e '^Requirement already satisfied' || true; }
}
# apt-get waits this long for a lock that another apt/dpkg (e.g. unattended-upgrades) holds, then fails.
APT_LOCK_TIMEOUT=${APT_LOCK_TIMEOUT:-300}
# The fingerprint of an install of extras $1: the interpreter, the host's torch, pyproject.toml without the sections
# that install nothing (pytest's and ruff's settings), setup.sh.
fingerprint() {
  { "$PYTHON" --version; echo "$host_torch"; echo "$1"; awk '/^\[/ { skip = /^\[tool\.(pytest|ruff)/ } !skip' pyproject.toml
    cat scripts/setup.sh; } 2>&1 | sha256sum | cut -d' ' -f1
}
# Whether .venv holds the install asked for (a serving one is held by the test install too).
up_to_date() {
  [[ -f $FINGERPRINT ]] || return 1
  local have
  have=$(<"$FINGERPRINT")
  [[ $have == "$(fingerprint "$EXTRAS")" || ($install == serve && $have == "$(fingerprint "$TEST_EXTRAS")") ]]
}

# The host's CUDA build of PyTorch, if $PYTHON has one ("" otherwise).
host_torch=$("$PYTHON" -c 'import torch; print(torch.__version__ if torch.version.cuda else "")' 2>/dev/null || true)
if $check; then  # changes nothing: 0 when .venv is set up for this checkout as it is, else 1
  if up_to_date; then exit 0; else exit 1; fi
fi
# A GPU host with no package index, with a carried bundle: the venv is made from the bundle over the host's
# torch (scripts/setup-bundle.sh), without pip or apt.
BUNDLE=${TTS_TRITON_BUNDLE:-.gpu-bundle}
if [[ -n $host_torch && -f $BUNDLE/triton.tar.xz ]]; then
  PYTHON=$PYTHON exec bash scripts/setup-bundle.sh "$BUNDLE"
fi

# 1. Debian packages.
# redis-server: the cache tests start real ones; flite: the corpus teacher of the slt voice (tts_triton.data.flite) and
# the natural-voice reference of evaluate --asr; libjemalloc2: tritonserver's allocator (tts_triton.processes.memory);
# festival + festvox-us-slt-hts + htsengine: the teacher of the slt voice (festival writes the HTS labels, hts_engine
# renders them under its prosody controls: tts_triton.data.festival)
packages=(espeak-ng libsndfile1 libjemalloc2)
[[ $install == test ]] && packages+=(redis-server flite festival festvox-us-slt-hts htsengine)
"$PYTHON" -c 'import ensurepip, venv' 2>/dev/null || packages+=(python3-venv)
missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
as_root=()
if ((${#missing[@]})) && [[ $(id -u) != 0 ]]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
  else
    echo "setup.sh: WARNING: not root and no password-less sudo; install these yourself: ${missing[*]}" >&2
    missing=()
  fi
fi
if ((${#missing[@]})); then
  step "apt-get install ${missing[*]}"
  apt=("${as_root[@]}" apt-get -o "DPkg::Lock::Timeout=$APT_LOCK_TIMEOUT")
  # `update` takes the lists lock, which DPkg::Lock::Timeout does not cover: retry while another apt holds it.
  deadline=$((SECONDS + APT_LOCK_TIMEOUT))
  until out=$("${apt[@]}" update -qq 2>&1); do
    if ! grep -q 'Could not get lock' <<<"$out" || ((SECONDS >= deadline)); then
      echo "$out" >&2
      exit 1
    fi
    step "apt-get update: waiting for another apt to release its lock"
    sleep 5
  done
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# 2. The virtual environment.
if [[ ! -e $VENV/bin/python && ! -L $VENV/bin/python ]]; then
  step "creating $VENV with $("$PYTHON" --version 2>&1)"
  "$PYTHON" -m venv "$VENV"
  if [[ -n $host_torch ]]; then  # python3 may itself be a venv, which --system-site-packages would not reach
    "$PYTHON" -c 'import site; print("\n".join(site.getsitepackages()))' \
      >"$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zz_host_site.pth"
  fi
elif ! "$VENV/bin/python" -c '' 2>/dev/null; then
  echo "setup.sh: $VENV/bin/python does not run (was its interpreter removed?); delete $VENV and re-run" >&2
  exit 1
fi

# 3. Python packages.
if up_to_date; then
  step "$VENV is up to date"
  exit 0
fi
rm -f "$FINGERPRINT"
if [[ -n $host_torch ]]; then
  step "using the host's torch $host_torch (CUDA)"
else
  step "pip install torch==$TORCH_VERSION"
  pip install "torch==$TORCH_VERSION"
fi
step "pip install -e '.[$EXTRAS]'"
pip install -e ".[$EXTRAS]"
if [[ -z $host_torch ]]; then  # with the host's packages in view, pip check would judge theirs too
  step "pip check"
  "$VENV/bin/python" -m pip check >/dev/null || { "$VENV/bin/python" -m pip check >&2; exit 1; }
fi
fingerprint "$EXTRAS" >"$FINGERPRINT"
step "done: $("$VENV/bin/python" --version), torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)')"
