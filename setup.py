"""Package discovery (the rest of the metadata is in pyproject.toml).

The library is ``tts_triton/``; the top-level folders ``client/`` and ``export/`` install as
``tts_triton.client`` and ``tts_triton.export``. Every package under them is found, so a new
subpackage can never be left out of the wheel.
"""

from setuptools import find_packages, setup

MAPPED = {"tts_triton.client": "client", "tts_triton.export": "export"}

packages = find_packages(include=["tts_triton", "tts_triton.*"])
for name, folder in MAPPED.items():
    packages += [name, *(f"{name}.{sub}" for sub in find_packages(folder))]

setup(packages=packages, package_dir={"tts_triton": "tts_triton", **MAPPED})
