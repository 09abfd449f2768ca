"""Every file under docs/ is linked: from a Markdown file outside docs/ (README.md, BENCHMARKS.md, the
chart's and the load test's READMEs...) or from a docs/ Markdown file that is itself linked; and every
relative link of the reference pages (all but the dated records under docs/records/, which keep the links
they were written with) leads to a file that exists."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[1]
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
