"""Every code snippet of the documentation runs, as written, against a real server.

Fenced ```python blocks of README.md, deploy/k8s/README.md, loadtest/README.md and docs/*.md run in a
subprocess of this interpreter; the ``.venv/bin/tts-triton`` lines of README.md's fenced ```bash blocks run
as commands, and the ``curl`` lines of their fenced ```bash blocks against a gateway. The one change (documented
in README.md, "Snippets are tested"): the default addresses
``localhost:8001`` and ``localhost:8000`` become the test server's gRPC and HTTP ports, and a ``tts-triton``
line without ``--url`` gets the test server's gRPC address. Each snippet has 60 seconds: one that hangs fails.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tts_triton.gateway.server import BackgroundGateway
from tts_triton.processes.triton_server import TritonServer

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "deploy" / "k8s" / "README.md", ROOT / "loadtest" / "README.md",
             *sorted((ROOT / "docs").glob("**/*.md"))]
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.S | re.M)
TIMEOUT_S = 60


def blocks(language: str, documents: list[Path]) -> list[tuple[str, str]]:
    """``(id, code)`` of every fenced block in ``language``; the id is the file and line."""
    found = []
    for path in documents:
        text = path.read_text()
        for match in FENCE.finditer(text):
            if match.group(1) == language:
                line = text.count("\n", 0, match.start()) + 1
                found.append((f"{path.relative_to(ROOT)}:{line}", match.group(2)))
    return found


PYTHON_BLOCKS = blocks("python", DOCUMENTS)
COMMANDS = [(f"{where}:{i}", line) for where, code in blocks("bash", [ROOT / "README.md"])
            for i, line in enumerate(code.splitlines()) if line.startswith(".venv/bin/tts-triton ")]
#: ``curl`` commands of the documents' bash blocks (continuation lines joined), run against the gateway.
CURLS = [(f"{where}:{i}", line) for where, code in blocks("bash", DOCUMENTS)
         for i, line in enumerate(code.replace("\\\n", " ").splitlines()) if line.startswith("curl ")]


def localize(code: str, server: TritonServer, gateway: str = "") -> str:
    code = code.replace("localhost:8001", server.grpc_url).replace("localhost:8000", server.http_url)
    return code.replace("http://localhost:8080", gateway) if gateway else code


def test_the_documentation_has_snippets() -> None:
    assert len(PYTHON_BLOCKS) >= 3 and len(COMMANDS) >= 4 and CURLS  # the extraction itself works


@pytest.mark.parametrize(("where", "line"), CURLS, ids=[w for w, _ in CURLS])
def test_curl_runs(where: str, line: str, server: TritonServer, gateway: BackgroundGateway, tmp_path: Path) -> None:
    args = shlex.split(localize(line, server, gateway.url))
    run = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S,
                         stdin=subprocess.DEVNULL)
    assert run.returncode == 0, f"{where}: {line}\n{run.stderr}"
    if "-o" in args:
        assert (tmp_path / args[args.index("-o") + 1]).stat().st_size > 0


@pytest.mark.parametrize(("where", "code"), PYTHON_BLOCKS, ids=[w for w, _ in PYTHON_BLOCKS])
def test_python_snippet_runs(where: str, code: str, server: TritonServer, gateway: BackgroundGateway,
                             tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-c", localize(code, server, gateway.url)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, f"{where}:\n{run.stderr}"


@pytest.mark.parametrize(("where", "line"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_command_runs(where: str, line: str, server: TritonServer, tmp_path: Path) -> None:
    sf.write(tmp_path / "my_voice.wav", 0.3 * np.sin(np.arange(44100) * 2 * np.pi * 220 / 22050), 22050)
    args = shlex.split(localize(line, server))
    if "--url" not in args:
        args += ["--url", server.grpc_url]
    args[0] = str(Path(sys.executable).with_name("tts-triton"))
    run = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S,
                         stdin=subprocess.DEVNULL)
    assert run.returncode == 0, f"{where}: {line}\n{run.stderr}"
    if "-o" in args:
        assert sf.info(tmp_path / args[args.index("-o") + 1]).frames > 0
