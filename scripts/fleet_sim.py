"""Discrete-event simulation of balancing streams over N Triton pods: round robin, random, least outstanding.

Each pod follows the H200 curves measured by ``tts-triton bench`` (the reports named in ``CURVES``): at c streams
in flight a pod produces X(c) audio seconds per second, shared equally by its streams (processor sharing), and
a new stream's first chunk takes a log-normal time with the measured p50 and p99 at that c. Streams arrive as a
Poisson process, spread over G gateways at random; each gateway balances by what it sees itself (its own
streams in flight, its own round-robin turn), as the real gateways do. Stream lengths are the benchmark's
sentences (2.7-5.0 s of audio) plus one stream in ten a 30 s paragraph: streams differ in length.

For each pod count N, offered load (mean streams per pod, by Little's law at the measured speed) and policy, it
reports the p99 first chunk and the mean streams on the busiest pod; writes ``fleet-sim.md`` and
``fleet-sim.png`` into ``--out``, and prints the streams per pod at which one pod crosses the first-chunk goal::

    .venv/bin/python scripts/fleet_sim.py --out docs/scale
"""

from __future__ import annotations

import argparse
import heapq
import math
import random
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
#: The measured curves of one pod (all four networks on the GPU, no MPS): levels 1/16/64, then 128/256.
CURVES = ("docs/records/bench/h200-product/all-gpu-bench.md", "docs/records/bench/h200-product/admission-256.md")
#: The first-chunk p99 goal (docs/bench-goals.toml, first_chunk_p99).
GOAL_P99_MS = 100.0
#: Audio seconds of the benchmark's six sentences (measured medians), and the paragraph one stream in ten speaks.
SENTENCES_S = (2.75, 4.28, 2.96, 4.98, 2.68, 4.25)
LONG_S, LONG_SHARE = 30.0, 0.1
POLICIES = ("round robin", "random", "least outstanding")
Z99 = 2.326


@dataclass(frozen=True)
class PodCurve:
    """A pod's measured behaviour by streams in flight: first chunk p50/p99 (ms), audio seconds per second."""

    concurrency: np.ndarray
    p50_ms: np.ndarray
    p99_ms: np.ndarray
    audio_per_s: np.ndarray

    @classmethod
    def from_reports(cls, paths: list[Path]) -> PodCurve:
        """The served rows of ``tts-triton bench`` reports' ``Results`` (a later report's level replaces an
        earlier's)."""
        rows: dict[int, tuple[float, float, float]] = {}
        for path in paths:
            lines = path.read_text().splitlines()
            header = next(i for i, line in enumerate(lines) if line.startswith("| runtime | concurrency | measured"))
            names = [c.strip() for c in lines[header].strip("|").split("|")]
            for line in lines[header + 2:]:
                if not line.startswith("|"):
                    break
                cells = dict(zip(names, (c.strip() for c in line.strip("|").split("|")), strict=True))
                if not cells["runtime"].startswith("triton"):
                    continue  # the eager baseline's rows
                value = {key: float(re.sub(r"[,\s]", "", cells[key])) for key in
                         ("concurrency", "first chunk p50 ms", "p99 ms", "audio s / s")}
                rows[int(value["concurrency"])] = (value["first chunk p50 ms"], value["p99 ms"], value["audio s / s"])
        levels = sorted(rows)
        return cls(np.array(levels, float), *(np.array([rows[c][i] for c in levels]) for i in range(3)))

    def at(self, values: np.ndarray, c: float) -> float:
        """``values`` at ``c`` streams: linear between levels, linear past the last two, the first below 1."""
        xs = self.concurrency
        if c >= xs[-1]:
            slope = (values[-1] - values[-2]) / (xs[-1] - xs[-2])
            return float(values[-1] + slope * (c - xs[-1]))
        return float(np.interp(max(c, xs[0]), xs, values))

    def speed(self, c: int) -> float:
        """Audio seconds per second that each of ``c`` streams gets."""
        return self._speeds[c] if c < len(self._speeds) else self.at(self.audio_per_s, c) / c

    def __post_init__(self) -> None:
        object.__setattr__(self, "_speeds", [self.at(self.audio_per_s, c) / max(c, 1) for c in range(1024)])

    def first_chunk_ms(self, c: int, rng: random.Random) -> float:
        p50, p99 = self.at(self.p50_ms, c), self.at(self.p99_ms, c)
        return p50 * math.exp(rng.gauss(0.0, math.log(max(p99 / p50, 1.0001)) / Z99))

    def goal_crossing(self, goal_ms: float) -> float:
        """Streams in flight at which the measured p99 first chunk reaches ``goal_ms`` (linear between levels)."""
        c = 1.0
        while self.at(self.p99_ms, c) < goal_ms:
            c += 0.25
        return c


class Pod:
    """Processor sharing with a speed that depends on the streams in flight: all streams advance together, so one
    virtual clock (audio seconds served to each stream so far) and a heap of finishing points suffice."""

    def __init__(self, curve: PodCurve) -> None:
        self.curve, self.virtual, self.updated, self.version = curve, 0.0, 0.0, 0
        self.finishing: list[tuple[float, int]] = []

    def advance(self, now: float) -> None:
        self.virtual += (now - self.updated) * self.curve.speed(len(self.finishing))
        self.updated = now

    def next_finish(self) -> float:
        if not self.finishing:
            return math.inf
        return self.updated + (self.finishing[0][0] - self.virtual) / self.curve.speed(len(self.finishing))


def simulate(curve: PodCurve, pods: int, load: float, policy: str, *, gateways: int, streams: int,
             seed: int) -> tuple[float, float]:
    """p99 first chunk (ms) and the mean busiest-pod streams at ``load`` mean streams per pod, over ``streams``
    arrivals or eight times the fleet's streams in flight, whichever is more; the first quarter is not counted."""
    rng = random.Random(seed)
    streams = max(streams, round(8 * pods * load))
    mean_audio = (1 - LONG_SHARE) * float(np.mean(SENTENCES_S)) + LONG_SHARE * LONG_S
    rate = pods * load * curve.speed(round(load)) / mean_audio  # Little's law at the measured speed
    fleet = [Pod(curve) for _ in range(pods)]
    own = [[0] * pods for _ in range(gateways)]  # each gateway's own streams per pod
    turn = [rng.randrange(pods) for _ in range(gateways)]
    owner: dict[int, tuple[int, int]] = {}
    choose: dict[str, Callable[[int], int]] = {
        "round robin": lambda g: turn.__setitem__(g, (turn[g] + 1) % pods) or turn[g],
        "random": lambda g: rng.randrange(pods),
        "least outstanding": lambda g: min(range(pods), key=lambda p: (own[g][p], rng.random())),
    }
    firsts, busiest = [], []
    now, arrivals = 0.0, 0
    next_arrival = rng.expovariate(rate)
    finishes: list[tuple[float, int, int]] = []  # (time, pod version, pod): stale once the pod changed

    def changed(p: int) -> None:
        fleet[p].version += 1
        if fleet[p].finishing:
            heapq.heappush(finishes, (fleet[p].next_finish(), fleet[p].version, p))

    while arrivals < streams:
        while finishes and finishes[0][1] != fleet[finishes[0][2]].version:
            heapq.heappop(finishes)
        if finishes and finishes[0][0] < next_arrival:
            now, _, index = heapq.heappop(finishes)
            pod = fleet[index]
            pod.advance(now)
            _, stream = heapq.heappop(pod.finishing)
            g, p = owner.pop(stream)
            own[g][p] -= 1
            changed(index)
            continue
        now = next_arrival
        next_arrival = now + rng.expovariate(rate)
        g = rng.randrange(gateways)
        p = choose[policy](g)
        pod = fleet[p]
        pod.advance(now)
        audio = LONG_S if rng.random() < LONG_SHARE else rng.choice(SENTENCES_S)
        heapq.heappush(pod.finishing, (pod.virtual + audio, arrivals))
        owner[arrivals] = (g, p)
        own[g][p] += 1
        changed(p)
        if arrivals >= streams // 4:
            firsts.append(curve.first_chunk_ms(len(pod.finishing), rng))
            if arrivals % 10 == 0:
                busiest.append(max(len(f.finishing) for f in fleet))
        arrivals += 1
    return float(np.percentile(firsts, 99)), float(np.mean(busiest))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/fleet-sim"), help="folder for the report and plot")
    parser.add_argument("--pods", type=int, nargs="+", default=[4, 16, 64])
    parser.add_argument("--loads", type=float, nargs="+", default=[16, 24, 32, 40, 48],
                        help="offered streams per pod (mean)")
    parser.add_argument("--streams", type=int, default=8000, help="arrivals per run")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    curve = PodCurve.from_reports([ROOT / c for c in CURVES])
    crossing = curve.goal_crossing(GOAL_P99_MS)
    rows = []
    for pods in args.pods:
        gateways = max(2, pods // 4)
        for load in args.loads:
            for policy in POLICIES:
                p99, busiest = simulate(curve, pods, load, policy, gateways=gateways, streams=args.streams,
                                        seed=args.seed)
                rows.append((pods, gateways, load, policy, p99, busiest))
                print(f"N={pods:3d} G={gateways:2d} load {load:4.0f}/pod {policy:18s} p99 first chunk {p99:7.1f} ms, "
                      f"busiest pod {busiest:5.1f} streams", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    _plot(rows, args, args.out / "fleet-sim.png")
    _report(rows, curve, crossing, args, args.out / "fleet-sim.md")
    print(f"one pod crosses the {GOAL_P99_MS:g} ms p99 goal at {crossing:g} streams; wrote {args.out}/fleet-sim.md")
    return 0


def _plot(rows: list[tuple], args: argparse.Namespace, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(args.pods), figsize=(4.2 * len(args.pods), 3.6), sharey=True)
    for ax, pods in zip(np.atleast_1d(axes), args.pods, strict=True):
        for policy in POLICIES:
            points = [(r[2], r[4]) for r in rows if r[0] == pods and r[3] == policy]
            ax.plot(*zip(*points, strict=True), marker="o", label=policy)
        ax.axhline(GOAL_P99_MS, color="grey", linestyle="--", linewidth=1)
        gateways = next(r[1] for r in rows if r[0] == pods)
        ax.set_title(f"{pods} pods, {gateways} gateways")
        ax.set_xlabel("offered streams per pod (mean)")
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("first chunk p99 (ms)")
    np.atleast_1d(axes)[0].legend()
    fig.suptitle("Simulated p99 first chunk by balancing policy (H200 pod curves)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _report(rows: list[tuple], curve: PodCurve, crossing: float, args: argparse.Namespace, path: Path) -> None:
    levels = ", ".join(f"{int(c)}: {p50:g} / {p99:g} ms, {x:g} audio s/s" for c, p50, p99, x in
                       zip(curve.concurrency, curve.p50_ms, curve.p99_ms, curve.audio_per_s, strict=True))
    lines = [
        "# Balancing policies over N pods: simulation",
        "",
        f"`python scripts/fleet_sim.py --out {args.out} --pods {' '.join(map(str, args.pods))} --loads "
        f"{' '.join(f'{x:g}' for x in args.loads)} --streams {args.streams} --seed {args.seed}` "
        "(the script's docstring has the model).",
        "",
        f"Pod curve (streams in flight: first chunk p50 / p99, throughput), from {', '.join(CURVES)}: {levels}.",
        f"One pod alone crosses the {GOAL_P99_MS:g} ms p99 first-chunk goal at {crossing:g} streams.",
        "",
        "| pods | gateways | streams per pod | policy | p99 first chunk ms | busiest pod, mean streams |",
        "|---:|---:|---:|---|---:|---:|",
        *(f"| {n} | {g} | {load:g} | {policy} | {p99:.1f} | {busiest:.1f} |"
          for n, g, load, policy, p99, busiest in rows),
        "",
        "![p99 first chunk by policy](fleet-sim.png)",
        "",
    ]
    path.write_text("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
