"""Where a running server's Python processes spend their CPU: py-spy samples of every Python stub of a tritonserver
(the BLS models' and the network models'), summed by process kind (``stub tts``, ``stub decoder``, ...) into the
functions with the most samples, on their own (self) and with what they call (inclusive). Idle threads are not
sampled (py-spy's default), so the shares are of CPU time. tritonserver itself is C++: py-spy cannot read it (the
bench's report gives its CPU). Run ``record`` while a load runs (``serving-check.sh profile`` runs it under the bench).

    python3 scripts/gpu/probe/hot_paths.py record --server PID --out DIR [--seconds 15] [--rate 100] [--py-spy PATH]
    python3 scripts/gpu/probe/hot_paths.py summary DIR [--top 25] [--out FILE]

``record`` writes one file of py-spy's raw (collapsed) stacks per process, ``KIND-PID.txt`` with the kind's spaces as
``_``; ``summary`` reads them back.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tts_triton.bench.stats import process_kind
from tts_triton.jobs.tables import markdown_table, print_report

#: ``function (file:line)`` of py-spy's raw format -> ``function (file)``: one row per function, whatever its line.
_FRAME = re.compile(r"^(?P<name>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def children(server: int) -> dict[int, str]:
    """The processes whose parent is ``server``, pid -> kind (:func:`~tts_triton.bench.stats.process_kind`)."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # the process exited meanwhile
        if parent == server:
            found[int(stat.parent.name)] = process_kind(stat.parent / "cmdline")
    return found


def record(server: int, out: Path, seconds: float, rate: int, py_spy: str) -> list[Path]:
    """Sample every child process of ``server`` for ``seconds`` at once; the files written."""
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    for pid, kind in sorted(children(server).items()):
        path = out / f"{kind.replace(' ', '_')}-{pid}.txt"
        runs.append((path, subprocess.Popen(
            [py_spy, "record", "--nonblocking", "--rate", str(rate), "--duration", str(int(seconds)), "--format",
             "raw", "--output", str(path), "--pid", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True)))
    written = []
    for path, run in runs:
        _, err = run.communicate()
        if run.returncode == 0 and path.exists():
            written.append(path)
        else:
            print(f"hot_paths: {path.name}: py-spy failed ({run.returncode}): {err.strip()[-300:]}", file=sys.stderr)
    return written


def _frame(text: str) -> str:
    match = _FRAME.match(text)
    return f"{match['name']} ({Path(match['file']).name})" if match else text


def stacks(path: Path) -> collections.Counter[tuple[str, ...]]:
    """The stacks of one raw file (outermost frame first) and their samples."""
    counts: collections.Counter[tuple[str, ...]] = collections.Counter()
    for line in path.read_text().splitlines():
        stack, _, samples = line.rpartition(" ")
        if stack and samples.isdigit():
            counts[tuple(_frame(f) for f in stack.split(";"))] += int(samples)
    return counts


def summary(folder: Path, top: int) -> str:
    """The Markdown summary of a ``record`` folder: per process kind, its samples and hottest functions."""
    by_kind: dict[str, collections.Counter[tuple[str, ...]]] = collections.defaultdict(collections.Counter)
    for path in sorted(folder.glob("*-[0-9]*.txt")):
        by_kind[path.stem.rsplit("-", 1)[0].replace("_", " ")].update(stacks(path))
    if not by_kind:
        return f"No py-spy samples in {folder}.\n"
    parts = [f"py-spy samples of the server's Python processes ({folder}), idle threads not sampled: per process "
             "kind, the functions with the most samples on their own (self) and with what they call (inclusive).\n"]
    for kind, counts in sorted(by_kind.items(), key=lambda item: -sum(item[1].values())):
        total = sum(counts.values())
        own: collections.Counter[str] = collections.Counter()
        inclusive: collections.Counter[str] = collections.Counter()
        for stack, samples in counts.items():
            own[stack[-1]] += samples
            for frame in set(stack):
                inclusive[frame] += samples
        rows = [[f"{100 * n / total:.1f} %", name] for name, n in own.most_common(top)]
        wide = [[f"{100 * n / total:.1f} %", name] for name, n in inclusive.most_common(top)]
        parts += [f"\n## {kind}: {total:,} samples\n\n", markdown_table(("self", "function"), rows), "\n\n",
                  markdown_table(("inclusive", "function"), wide), "\n"]
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="sample every Python stub of a running tritonserver")
    rec.add_argument("--server", type=int, required=True, help="tritonserver's process id")
    rec.add_argument("--out", type=Path, required=True, help="folder for the raw stacks")
    rec.add_argument("--seconds", type=float, default=15.0, help="how long to sample (default %(default)s)")
    rec.add_argument("--rate", type=int, default=100, help="samples per second (default %(default)s)")
    rec.add_argument("--py-spy", default=shutil.which("py-spy") or "py-spy", help="the py-spy binary")
    summ = sub.add_parser("summary", help="the hottest functions of a record folder, by process kind")
    summ.add_argument("folder", type=Path)
    summ.add_argument("--top", type=int, default=25, help="functions per table (default %(default)s)")
    summ.add_argument("--out", type=Path, help="also write the summary here (Markdown)")
    args = p.parse_args(argv)
    if args.command == "record":
        if shutil.which(args.py_spy) is None:
            p.error(f"--py-spy {args.py_spy}: no such program (pip install py-spy, or carry its wheel)")
        if not children(args.server):
            p.error(f"--server {args.server}: no process has it as its parent (is it tritonserver's pid?)")
        return 0 if record(args.server, args.out, args.seconds, args.rate, args.py_spy) else 1
    print_report(summary(args.folder, args.top), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
