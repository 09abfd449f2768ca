"""Tensor, request-parameter and metric names are spelled once, in tts_triton.core.contract: the Triton adapters,
the clients (client library, gateway, health check, model control, benchmark, load test), the decode core, the
network engine, the repository builder and the GPU probes import them, and this test fails when one of them spells a
name as a string literal. Pure source reading."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tts_triton.core import contract

ROOT = Path(__file__).resolve().parents[2]
#: Names every reader takes from the contract: the public tensors, the request parameters, the metrics.
PUBLIC = {spec.name for spec in contract.tts_spec(contract.ModelConfig()).inputs + contract.tts_spec(
    contract.ModelConfig()).outputs} | {contract.STOP_PARAMETER, contract.CACHE_PARAMETER,
                                                 contract.CACHE_SCOPE_PARAMETER} | {
    contract.ACTIVE_METRIC, contract.REQUESTS_METRIC, contract.PHASE_METRIC, contract.CACHE_LOOKUPS_METRIC,
    contract.CACHE_BYTES_METRIC, contract.CACHE_WRITES_METRIC}
#: The networks' tensor names, for the code that calls the networks.
NETWORK = {t.name for spec in contract.network_specs(contract.ModelConfig()).values()
           for t in spec.inputs + spec.outputs}
ADAPTERS_AND_CLIENTS = ["tts_triton/triton", "client", "tts_triton/gateway", "tts_triton/processes/health.py",
                        "tts_triton/processes/model_control.py", "tts_triton/bench", "tts_triton/cache", "loadtest"]
NETWORK_CALLERS = ["tts_triton/triton", "tts_triton/serving", "tts_triton/engine", "tts_triton/model_instance",
                   "tts_triton/models/stages.py", "export", "scripts/gpu/probe"]


def _files(places: list[str]) -> list[Path]:
    return sorted(f for place in places for f in ([ROOT / place] if place.endswith(".py")
                                                  else (ROOT / place).rglob("*.py")))


def _literals(path: Path) -> list[tuple[int, str]]:
    """The string literals of a module with their lines, docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


@pytest.mark.parametrize(("places", "names"), [(ADAPTERS_AND_CLIENTS, PUBLIC), (NETWORK_CALLERS, PUBLIC | NETWORK)],
                         ids=["public names", "network tensor names"])
def test_no_contract_name_is_spelled_as_a_literal(places: list[str], names: set[str]) -> None:
    spelled = [f"{path.relative_to(ROOT)}:{line}: {value!r}" for path in _files(places)
               for line, value in _literals(path) if value in names]
    assert not spelled, "import these from tts_triton.core.contract:\n" + "\n".join(spelled)


def test_a_spelled_name_is_found(tmp_path: Path) -> None:
    module = tmp_path / "adapter.py"
    module.write_text('"""Mentions AUDIO in its docstring."""\nout = {"AUDIO": 1, "audio": 2}\n')
    assert [value for _, value in _literals(module) if value in PUBLIC | NETWORK] == ["AUDIO", "audio"]
