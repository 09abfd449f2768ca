"""The bench's figure: latency, RTF and throughput against concurrency."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from tts_triton.bench.stats import LevelSummary
from tts_triton.jobs.figures import pyplot, save_figure

__all__ = ["plot"]


def plot(served: Mapping[str, Sequence[LevelSummary]], baseline: Sequence[LevelSummary], path: Path,
         title: str) -> None:
    """Three panels against concurrency (log scales): first-chunk p50/p99, RTF, aggregate x real time, one line per
    series of served levels (keyed by a label prefix: "" for a single series, e.g. "80 % repeats" otherwise); the
    eager baseline's levels as dashed grey reference lines."""
    from matplotlib.ticker import FormatStrFormatter  # optional heavy dependency (the dev/loadtest extras)

    fig, axes = pyplot().subplots(1, 3, figsize=(14, 4.2))
    panels = (
        (axes[0], "first-chunk latency", "ms", (("p50", "first_chunk_p50", "o"), ("p99", "first_chunk_p99", "^"))),
        (axes[1], "real-time factor (total time / audio s)", "", (("mean", "rtf_mean", "o"),)),
        (axes[2], "throughput", "x real time (audio s / s)", (("aggregate", "audio_per_second", "o"),)),
    )
    for ax, title_, unit, series in panels:
        for stat, attr, marker in series:
            lines = [(f"{prefix} {stat}".strip(), levels, {}) for prefix, levels in served.items()]
            for label, levels, style in [*lines, (f"eager {stat}", baseline, {"linestyle": "--", "color": "grey"})]:
                points = [(s.concurrency, getattr(s, attr)) for s in levels if getattr(s, attr) > 0]
                if points:  # log axes: NaN and zero (nothing measured) are left out
                    ax.plot(*zip(*points, strict=True), marker=marker, **style, label=label)
        ax.set_title(title_)
        ax.set_ylabel(unit)
        ax.set_yscale("log")
    axes[1].axhline(1.0, color="black", linestyle=":", linewidth=1, label="real time")
    ticks = sorted({s.concurrency for levels in [*served.values(), baseline] for s in levels}) or [1]
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(c) for c in ticks])
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.set_xlabel("concurrent streams")
        ax.grid(alpha=0.3, which="both")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=110)

