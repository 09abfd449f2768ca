#!/usr/bin/env bash
# Make this checkout of tts-triton importable by a Python environment without installing it (the GPU host has no
# package index, and its setuptools may be older than the >= 77 pyproject.toml asks for):
#     scripts/gpu/checkout-path.sh [SITE_PACKAGES]   # default: the site-packages of the first python3 on PATH
# Writes SITE_PACKAGES/tts_triton_checkout.py and tts_triton_checkout.pth. The .pth puts the checkout's root on
# sys.path and imports the module, which adds an import hook for the packages setup.py maps from other folders
# (MAPPED: tts_triton.client <- client/, tts_triton.export <- export/), as pip's editable install would. Triton's
# Python stubs, started from the same environment, read the same .pth.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
site=${1:-$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')}
root_literal=$(python3 -c 'import sys; print(repr(sys.argv[1]))' "$root")
cat > "$site/tts_triton_checkout.py" <<PY
"""Import hook written by scripts/gpu/checkout-path.sh for the tts-triton checkout at ROOT: the packages that
setup.py's MAPPED takes from other folders are loaded from there."""

import ast
import importlib.util
import sys
from pathlib import Path

ROOT = Path($root_literal)


def _mapped() -> dict[str, str]:
    for node in ast.parse((ROOT / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "MAPPED" for t in node.targets):
            return ast.literal_eval(node.value)
    raise ImportError(f"{ROOT / 'setup.py'} defines no MAPPED")


class MappedPackages:
    """A meta path finder for the mapped packages; their subpackages are found through their own __path__."""

    mapped = _mapped()

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        folder = cls.mapped.get(name)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(name, ROOT / folder / "__init__.py",
                                                      submodule_search_locations=[str(ROOT / folder)])


sys.meta_path.insert(0, MappedPackages)
PY
printf '%s\nimport tts_triton_checkout\n' "$root" > "$site/tts_triton_checkout.pth"
echo "checkout-path: $root importable from $site"
