"""Goals a bench report is compared with, read from a file the caller passes (``--goals FILE``).

The file (TOML, or JSON with the same structure) has one table per goal, any subset, in the order the report
lists them::

    [first_chunk_p50]      # ms at one concurrency
    concurrency = 1
    at_most_ms = 10
    [first_chunk_p99]
    concurrency = 64
    at_most_ms = 100
    [x_real_time]          # aggregate audio s / s at the best level whose first-chunk p99 is within the limit
    p99_at_most_ms = 250
    at_least = 1000
    [throughput_vs_eager]  # served / eager aggregate at one concurrency
    concurrency = 64
    at_least = 30
    [rtf_vs_eager]         # eager RTF / served RTF at one concurrency
    concurrency = 1
    at_least = 3
    [gpu_memory]           # peak of the server's GPU memory samples
    at_most_gb = 6
    [soak_memory_growth]   # last - first GPU memory sample of the soak
    at_most_mib = 64
    [scale_vs_reference]   # best aggregate against that of the --reference run, both within the p99 limit
    p99_at_most_ms = 250
    at_least = 1.8
    [x_real_time_vs_ceiling]  # best aggregate (p99 within the limit) over the in-process ceiling (--ceiling)
    p99_at_most_ms = 250
    at_least = 0.7
    [errors]               # failed streams over the sweep and the soak
    at_most = 0
    [soak_requests]        # measured requests of the soak
    at_least = 2000

``docs/bench-goals.toml`` is an example.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tts_triton.bench.stats import LevelSummary, MemoryTrend, best_level, ratio

__all__ = ["GOAL_PARAMETERS", "Ceiling", "Goals", "GoalsError", "RunNumbers"]

#: Each goal's parameters (all required).
GOAL_PARAMETERS: dict[str, tuple[str, ...]] = {
    "first_chunk_p50": ("concurrency", "at_most_ms"),
    "first_chunk_p99": ("concurrency", "at_most_ms"),
    "x_real_time": ("p99_at_most_ms", "at_least"),
    "throughput_vs_eager": ("concurrency", "at_least"),
    "rtf_vs_eager": ("concurrency", "at_least"),
    "gpu_memory": ("at_most_gb",),
    "soak_memory_growth": ("at_most_mib",),
    "scale_vs_reference": ("p99_at_most_ms", "at_least"),
    "x_real_time_vs_ceiling": ("p99_at_most_ms", "at_least"),
    "errors": ("at_most",),
    "soak_requests": ("at_least",),
}


class GoalsError(ValueError):
    """A goals file that cannot be read or names an unknown goal or parameter."""


@dataclass(frozen=True)
class RunNumbers:
    """What goals are judged on: the served and eager levels, the trend of every GPU memory sample and of the
    soak's, the soak's measured requests (0: no soak), the best level of a ``--reference`` run, the in-process
    ceiling (``--ceiling``) and the failed streams of the sweep and the soak (with ``streams``, how many ran)."""

    served: Sequence[LevelSummary]
    baseline: Sequence[LevelSummary]
    memory: MemoryTrend | None = None
    soak: MemoryTrend | None = None
    soak_requests: int = 0
    reference: LevelSummary | None = None
    ceiling: Ceiling | None = None
    errors: int = 0
    streams: int = 0


@dataclass(frozen=True)
class Ceiling:
    """The in-process ceiling (``scripts/gpu/probe/ceiling.py --json``): the most x real time its rows reach, at how
    many streams, on which device."""

    x_real_time: float
    streams: int
    device: str

    @classmethod
    def load(cls, path: Path) -> Ceiling:
        """Read a ceiling file; raises GoalsError naming what is wrong."""
        try:
            data = json.loads(path.read_text())
            best = max(data["rows"], key=lambda row: row["x_real_time"])
            return cls(float(best["x_real_time"]), int(best["streams"]), str(data.get("device", "?")))
        except (OSError, ValueError, KeyError, TypeError) as err:  # JSONDecodeError is a ValueError
            raise GoalsError(f"{path}: not a ceiling file of probe/ceiling.py --json ({type(err).__name__}: {err})") \
                from None


def _num(value: float, digits: int = 0) -> str:
    return "–" if math.isnan(value) else f"{value:,.{digits}f}"


def _verdict(value: float, limit: float, at_least: bool = False) -> str:
    if math.isnan(value):
        return "not measured"
    return "yes" if (value >= limit if at_least else value <= limit) else "**no**"


_NAN = LevelSummary(0, 0, 0, 0, 0, *([math.nan] * 11))


@dataclass(frozen=True)
class Goals:
    """Goals by name (see :data:`GOAL_PARAMETERS`), each with its parameters, in the file's order."""

    entries: Mapping[str, Mapping[str, float]]

    @classmethod
    def parse(cls, data: Mapping[str, object]) -> Goals:
        """Validate a decoded goals file; raises GoalsError naming what is wrong."""
        entries: dict[str, dict[str, float]] = {}
        for name, params in data.items():
            if name not in GOAL_PARAMETERS:
                raise GoalsError(f"unknown goal {name!r}; known: {', '.join(GOAL_PARAMETERS)}")
            if not isinstance(params, Mapping) or set(params) != set(GOAL_PARAMETERS[name]):
                raise GoalsError(f"goal {name!r} takes exactly {', '.join(GOAL_PARAMETERS[name])}")
            if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in params.values()):
                raise GoalsError(f"goal {name!r}: parameters must be numbers")
            entries[name] = {k: float(v) for k, v in params.items()}
        return cls(entries)

    @classmethod
    def load(cls, path: Path) -> Goals:
        """Read a TOML (or, by its ``.json`` suffix, JSON) goals file."""
        try:
            text = path.read_text()
            data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
        except (OSError, ValueError) as err:  # tomllib.TOMLDecodeError and JSONDecodeError are ValueErrors
            raise GoalsError(f"{path}: {err}") from None
        return cls.parse(data)

    def reference_p99_ms(self, default: float) -> float:
        """The p99 limit the best level of a ``--reference`` run is chosen by."""
        return self.entries.get("scale_vs_reference", {}).get("p99_at_most_ms", default)

    def rows(self, run: RunNumbers) -> list[list[str]]:
        """(goal, measured, met) for each goal, from this run's numbers."""
        return [getattr(self, f"_{name}")(run, params) for name, params in self.entries.items()
                if name != "scale_vs_reference" or run.reference is not None]

    def _x_real_time_vs_ceiling(self, run: RunNumbers, p: Mapping[str, float]) -> list[str]:
        limit, best = p["p99_at_most_ms"], best_level(run.served, p["p99_at_most_ms"])
        goal = f">= {p['at_least']:.0%} of the in-process ceiling at the best concurrency with p99 <= {limit:g} ms"
        if run.ceiling is None:
            return [goal, "no ceiling (--ceiling FILE)", "not measured"]
        value = ratio(best.audio_per_second if best else math.nan, run.ceiling.x_real_time)
        served = (f"{_num(best.audio_per_second)}x at concurrency {best.concurrency}" if best
                  else f"no level had p99 <= {limit:g} ms")
        ceiling = _num(run.ceiling.x_real_time, 0 if run.ceiling.x_real_time >= 10 else 2)  # a CPU's: below 1x
        return [goal, f"{_num(100 * value)} %: {served} of {ceiling}x ({run.ceiling.streams} streams, "
                      f"{run.ceiling.device})",
                "**no**" if best is None and run.served else _verdict(value, p["at_least"], at_least=True)]

    def _errors(self, run: RunNumbers, p: Mapping[str, float]) -> list[str]:
        return [f"at most {p['at_most']:g} failed streams over the sweep and the soak",
                f"{run.errors} of {run.streams}", _verdict(run.errors, p["at_most"]) if run.streams else "not measured"]

    def _soak_requests(self, run: RunNumbers, p: Mapping[str, float]) -> list[str]:
        return [f"a soak of at least {p['at_least']:g} requests", f"{run.soak_requests} requests",
                _verdict(run.soak_requests, p["at_least"], at_least=True) if run.soak_requests else "**no** (no soak)"]

    @staticmethod
    def _at(levels: Sequence[LevelSummary], concurrency: float) -> LevelSummary:
        return next((s for s in levels if s.concurrency == concurrency), _NAN)

    def _first_chunk(self, run: RunNumbers, p: Mapping[str, float], q: str) -> list[str]:
        level, c = self._at(run.served, p["concurrency"]), int(p["concurrency"])
        value = getattr(level, f"first_chunk_{q}")
        return [f"first chunk {q} <= {p['at_most_ms']:g} ms at concurrency {c}", f"{_num(value, 1)} ms",
                _verdict(value, p["at_most_ms"])]

    def _first_chunk_p50(self, run: RunNumbers, p: Mapping[str, float]) -> list[str]:
        return self._first_chunk(run, p, "p50")

    def _first_chunk_p99(self, run: RunNumbers, p: Mapping[str, float]) -> list[str]:
        return self._first_chunk(run, p, "p99")

    def _x_real_time(self, run: RunNumbers, p: Mapping[str, float]) -> list[str]:
        limit, best = p["p99_at_most_ms"], best_level(run.served, p["p99_at_most_ms"])
        goal = f">= {p['at_least']:g}x real time at the best concurrency with first chunk p99 <= {limit:g} ms"
        if best is None:
            return [goal, f"no level had p99 <= {limit:g} ms", "**no**" if run.served else "not measured"]
        return [goal, f"{_num(best.audio_per_second)}x at concurrency {best.concurrency} "
                      f"(p99 {_num(best.first_chunk_p99)} ms)",
                _verdict(best.audio_per_second, p["at_least"], at_least=True)]

    def _throughput_vs_eager(self, run: RunNumbers, p: Mapping[str, float]) -> list[str]:
        c = p["concurrency"]
        value = ratio(self._at(run.served, c).audio_per_second, self._at(run.baseline, c).audio_per_second)
        return [f">= {p['at_least']:g}x the eager baseline's throughput at concurrency {int(c)}", f"{_num(value, 1)}x",
                _verdict(value, p["at_least"], at_least=True)]

    def _rtf_vs_eager(self, run: RunNumbers, p: Mapping[str, float]) -> list[str]:
        c = p["concurrency"]
        value = ratio(self._at(run.baseline, c).rtf_mean, self._at(run.served, c).rtf_mean)
        return [f"RTF at concurrency {int(c)} >= {p['at_least']:g}x better than the eager baseline",
                f"{_num(value, 1)}x", _verdict(value, p["at_least"], at_least=True)]

    def _gpu_memory(self, run: RunNumbers, p: Mapping[str, float]) -> list[str]:
        peak = run.memory.peak if run.memory else math.nan
        return [f"GPU memory of the server <= {p['at_most_gb']:g} GB (peak)",
                f"{_num(peak / 1e9, 2)} GB" if run.memory else "n/a (no GPU metrics)",
                _verdict(peak, p["at_most_gb"] * 1e9)]

    def _soak_memory_growth(self, run: RunNumbers, p: Mapping[str, float]) -> list[str]:
        growth = run.soak.growth if run.soak else math.nan
        measured = (f"{growth / 2**20:+,.0f} MiB over {run.soak_requests} requests" if run.soak
                    else "n/a (no GPU metrics)" if run.soak_requests else "no soak (--soak N)")
        return [f"no GPU memory growth over the soak (<= {p['at_most_mib']:g} MiB)", measured,
                _verdict(growth, p["at_most_mib"] * 2**20)]

    def _scale_vs_reference(self, run: RunNumbers, p: Mapping[str, float]) -> list[str]:
        reference, limit = run.reference, p["p99_at_most_ms"]
        assert reference is not None  # rows() leaves this goal out without a reference
        best = best_level(run.served, limit)
        value = ratio(best.audio_per_second if best else math.nan, reference.audio_per_second)
        return [f">= {p['at_least']:g}x the aggregate of the --reference run (best levels with p99 <= {limit:g} ms)",
                f"{_num(value, 2)}x (reference: {_num(reference.audio_per_second)}x at concurrency "
                f"{reference.concurrency})", _verdict(value, p["at_least"], at_least=True)]
