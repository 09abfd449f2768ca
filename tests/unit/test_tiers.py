"""The suite's layout: every test module sits in a tier folder (tests/conftest.py's TIERS), and a test module imports
another only from its own folder (pytest puts a module's folder on sys.path as it collects it, so an import from
another tier works only when that tier was collected first; what tiers share lives at tests/ top level)."""

from __future__ import annotations

import ast

from conftest import TESTS, TIERS


def test_every_test_module_is_in_a_tier() -> None:
    modules = sorted(TESTS.rglob("test_*.py"))
    assert {path.relative_to(TESTS).parts[0] for path in modules} == set(TIERS)
    assert [str(path) for path in modules if path.parent.parent != TESTS] == []


def test_test_modules_import_test_modules_of_their_own_tier_only() -> None:
    crossing = []
    for path in sorted(TESTS.rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level
                     else [alias.name for alias in node.names] if isinstance(node, ast.Import) else [])
            crossing += [f"{path.relative_to(TESTS)} imports {name}" for name in names
                         if name.startswith("test_") and not (path.parent / f"{name}.py").exists()]
    assert crossing == []
