"""The package's import graph: no module of tts_triton imports itself back through others (a circle), and no part
imports from a part above it (:data:`LAYERS`). Imports inside ``if TYPE_CHECKING:`` are left out (they never run);
imports inside functions count. Pure source reading, but for one import of the network adapters in a fresh
interpreter: a network model's process loads neither the text front end nor the decode core."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The package's folders: ``client/`` and ``export/`` install as ``tts_triton.client`` and ``tts_triton.export``.
FOLDERS = {"tts_triton": ROOT / "tts_triton", "tts_triton.client": ROOT / "client",
           "tts_triton.export": ROOT / "export"}
#: The parts from the bottom up, as README.md's architecture table lists them from the top down (each row one
#: layer; the package's ``__init__`` at the bottom): a module may import from its own part and from the parts
#: listed under it.
LAYERS: tuple[str, ...] = ("tts_triton", *reversed(re.findall(r"^\| `(tts_triton[\w.]*)` \| `[^`]+` \|",
                                                              (ROOT / "README.md").read_text(encoding="utf-8"),
                                                              re.M)))


def _modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its ``__init__``)."""
    found = {}
    for package, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if package == "tts_triton" and parts[0] in ("client", "export"):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """The nodes of a module outside its ``if TYPE_CHECKING:`` blocks."""
    nodes, todo = [], [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        nodes.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return nodes


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that module ``name`` imports: for ``from P import X``, the submodule ``P.X`` if there
    is one (and ``P``'s ``__init__``, which runs first, unless ``name`` is inside ``P``), else ``P``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    wanted: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            wanted.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub not in modules or not name.startswith(base + "."):
                    wanted.add(base)
                if sub in modules:
                    wanted.add(sub)
    found = set()
    for target in wanted:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _layer(module: str) -> tuple[int, str]:
    """The layer of a module and the part it belongs to (the longest part name that contains it)."""
    matches = [(part, i) for i, part in enumerate(LAYERS) if module == part or module.startswith(part + ".")]
    part, layer = max(matches, key=lambda match: len(match[0]))
    return layer, part


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while (member := stack.pop()) != node:
                group.append(member)
            if group:
                circles.append(sorted([node, *group]))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_the_import_graph_has_no_circle() -> None:
    assert _circles(_graph()) == []


def test_the_circle_finder_finds_one() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_part_has_a_row_in_the_architecture_table() -> None:
    parts = {".".join(name.split(".")[:2]) for name in _modules() if name != "tts_triton"}
    assert parts - set(LAYERS) == set(), "parts missing from README.md's architecture table"
    assert len(LAYERS) == len(set(LAYERS)), "a part listed twice"


def test_no_part_imports_from_a_higher_one() -> None:
    upward = [f"{module} -> {target}" for module, targets in sorted(_graph().items()) for target in sorted(targets)
              if _layer(target)[0] > _layer(module)[0]]
    assert upward == []


def test_a_network_model_loads_neither_the_front_end_nor_the_decode_core() -> None:
    code = ("import sys, fake_pb_utils; sys.modules['triton_python_backend_utils'] = fake_pb_utils; "
            "import tts_triton.triton.onnx_model, tts_triton.triton.torch_model; "
            "print(sorted(m for m in sys.modules if m.startswith(('tts_triton.text', 'tts_triton.serving'))))")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT / "tests", capture_output=True, text=True,
                            check=True).stdout.strip()
    assert loaded == "[]"
