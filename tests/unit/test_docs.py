"""Every file under docs/ is linked: from a Markdown file outside docs/ (README.md, BENCHMARKS.md, the
chart's and the load test's READMEs...) or from a docs/ Markdown file that is itself linked; and every
relative link of the reference pages (all but the dated records under docs/records/, which keep the links
they were written with) leads to a file that exists. The paths and modules the reference pages cite in
code spans exist too, and their links to a heading of a Markdown page find it."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
RECORDS = DOCS / "records"
#: A Markdown link or image: ``[text](target)`` or ``![alt](target "title")``.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / name for name in out.split("\0") if name and (ROOT / name).is_file()]


def links(markdown: Path) -> list[tuple[str, Path]]:
    """The relative links of a Markdown file: (as written, the file it leads to)."""
    found = []
    for target in LINK.findall(markdown.read_text(encoding="utf-8")):
        if "://" in target or target.startswith(("#", "mailto:")):
            continue
        found.append((target, (markdown.parent / unquote(target.split("#", 1)[0])).resolve()))
    return found


def test_every_docs_file_is_linked_and_every_link_resolves() -> None:
    files = tracked()
    docs = {f for f in files if DOCS in f.parents}
    queue = [f for f in files if f.suffix == ".md" and DOCS not in f.parents]
    seen, broken = set(queue), []
    while queue:
        page = queue.pop()
        for written, target in links(page):
            if not target.exists():
                if RECORDS not in page.parents:
                    broken.append(f"{page.relative_to(ROOT)}: {written}")
            elif target not in seen:
                seen.add(target)
                if target.suffix == ".md" and DOCS in target.parents:
                    queue.append(target)
    assert not broken, "links to nothing:\n" + "\n".join(sorted(broken))
    unlinked = sorted(str(f.relative_to(ROOT)) for f in docs - seen)
    assert not unlinked, "docs/ files that nothing links to:\n" + "\n".join(unlinked)


#: The reference pages: README.md, BENCHMARKS.md and docs/*.md (the records keep what they were written with).
PAGES = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted(DOCS.glob("*.md"))]
#: A code span's path from the checkout's root, e.g. ``client/balancer.py`` or ``deploy/docker/``.
CODE_PATH = re.compile(r"`([\w.-]+(?:/[\w.-]*)+)`")
#: A dotted name in the package, e.g. ``tts_triton.bench.heavy_request`` or ``tts_triton.errors.KINDS``.
DOTTED = re.compile(r"\btts_triton(?:\.\w+)+")
#: The package's folders: ``client/`` and ``export/`` install as ``tts_triton.client`` and ``tts_triton.export``.
FOLDERS = {"tts_triton.client": ROOT / "client", "tts_triton.export": ROOT / "export",
           "tts_triton": ROOT / "tts_triton"}


def cited_paths(page: Path, top: set[str]) -> list[str]:
    """The paths of ``page``'s code spans that start at a tracked top-level file or folder (so neither
    ``runs/bench/`` nor ``~/.cache/...``, which the commands make)."""
    return [path.rstrip(".") for path in CODE_PATH.findall(page.read_text(encoding="utf-8"))
            if path.split("/")[0] in top]


def module_file(dotted: str) -> tuple[Path | None, list[str]]:
    """The file of the longest module prefix of ``dotted``, and the names after it."""
    package = next(name for name in FOLDERS if dotted == name or dotted.startswith(name + "."))
    folder, parts = FOLDERS[package], dotted[len(package) + 1:].split(".") if dotted != package else []
    for cut in range(len(parts), -1, -1):
        base = folder.joinpath(*parts[:cut])
        for candidate in (base / "__init__.py", base.with_suffix(".py") if cut else None):
            if candidate is not None and candidate.is_file():
                return candidate, parts[cut:]
    return None, parts


def defines(module: Path, name: str) -> bool:
    """Whether ``module`` binds ``name`` at its top level (a def, a class, an assignment or an import)."""
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name:
            return True
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(target, ast.Name) and target.id == name for target in targets):
            return True
        if isinstance(node, ast.Import | ast.ImportFrom) and any((alias.asname or alias.name) == name
                                                                    for alias in node.names):
            return True
    return False


def test_cited_paths_and_modules_exist() -> None:
    top = {path.relative_to(ROOT).parts[0] for path in tracked()}
    missing = []
    for page in PAGES:
        missing += [f"{page.relative_to(ROOT)}: {path}" for path in cited_paths(page, top)
                    if not (ROOT / path).exists()]
        for dotted in sorted(set(DOTTED.findall(page.read_text(encoding="utf-8")))):
            module, rest = module_file(dotted)
            # a module, or a module and one name it defines (``tts_triton.errors.KINDS``; a class's method beyond)
            if module is None or (rest and not defines(module, rest[0])):
                missing.append(f"{page.relative_to(ROOT)}: {dotted}")
    assert PAGES[0].name == "README.md" and len(PAGES) > 3  # the pages are found
    assert not missing, "cited paths or modules that do not exist:\n" + "\n".join(missing)


def headings(markdown: Path) -> set[str]:
    """The anchors of a page's headings as GitHub makes them: lowercase, punctuation dropped, spaces as hyphens."""
    return {re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            for line in markdown.read_text(encoding="utf-8").splitlines() if line.startswith("#")}


def test_links_to_a_heading_find_it() -> None:
    lost, checked = [], 0
    for page in PAGES:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            path, _, anchor = target.partition("#")
            linked = (page.parent / unquote(path)).resolve() if path else page
            if not anchor or "://" in target or linked.suffix != ".md" or not linked.exists():
                continue
            checked += 1
            if anchor not in headings(linked):
                lost.append(f"{page.relative_to(ROOT)}: {target}")
    assert checked > 5  # README.md and the pages link headings
    assert not lost, "links to a heading the page lacks:\n" + "\n".join(lost)
