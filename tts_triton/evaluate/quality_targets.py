"""The quality targets of a checkpoint, judged from the JSON its evaluations wrote, and the before/after table.

    python -m tts_triton.evaluate.quality_targets --after RESULTS.json [ASR.json ...] \
        [--before RESULTS.json [ASR.json ...]] [--out TABLE.md]

Each side is one or more JSON files: the full evaluation's (``eval/results.json`` beside the report of
``python -m tts_triton.evaluate``, with the round trip under ``asr`` when ``--asr`` was given) and any round
trips of ``--asr-only`` (their JSON beside the report); round trips of several voices are merged. The default
voice is the one the evaluated bank had (recorded in the JSON; ``--before-voice`` / ``--after-voice`` name it
for a JSON written before that was recorded). A measure the files lack shows as "not measured", never a number.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tts_triton.data.prosody import CORPUS_VOICES, EMOTIONS
from tts_triton.jobs.tables import print_report

#: Targets over every evaluated voice on the test split (MCD to each item's own voice's teacher rendering).
GOAL_MEDIAN_MCD_DB = 4.0
GOAL_IDENTITY_PCT = 90.0
GOAL_STOP_FAILURE_PCT = 1.0
GOAL_EMOTION_ORDER_PCT = 80.0
#: Targets of the default voice: ASR word error rate (mean over the held-out sentences) at most this many times
#: its teacher's and at most GOAL_WER; median MCD to its teacher's renderings.
GOAL_WER_RATIO = 1.25
GOAL_WER = 0.20
GOAL_DEFAULT_MCD_DB = 4.5
#: The round trip's WER differences below this are noise: another voice "did not get worse" within it.
WER_NOISE = 0.05
#: The round trip's source names of the voice's teacher ("espeak-ng" in JSON written before flite voices).
TEACHER_SOURCES = ("teacher", "espeak-ng")
NOT_MEASURED = "not measured"


@dataclass
class Results:
    """What one side's JSON files hold: the full evaluation (``full``), the round trips merged (``asr``: mean WER by
    source and voice, median MCD by voice, sentence counts by voice) and their emotion checks (``ordered``:
    voice -> the model's F0 order on held-out sentences), and the default voice."""

    full: dict[str, Any] | None = None
    asr_wer: dict[str, dict[str, float]] = field(default_factory=dict)
    asr_mcd: dict[str, float] = field(default_factory=dict)
    asr_sentences: dict[str, int] = field(default_factory=dict)
    ordered: dict[str, bool] = field(default_factory=dict)
    default_voice: str | None = None

    def add(self, data: Mapping[str, Any]) -> None:
        """Merge one JSON file's object: a full evaluation (``utterances``) or a round trip (``mean_wer``)."""
        if "utterances" in data:
            self.full = dict(data)
            if "asr" in data:
                self.add(data["asr"])
        elif "mean_wer" in data:
            for source, by_voice in data["mean_wer"].items():
                name = "teacher" if source in TEACHER_SOURCES else source
                self.asr_wer.setdefault(name, {}).update(by_voice)
                self.asr_sentences.update({v: len(data["sentences"]) for v in by_voice})
            self.asr_mcd.update(data.get("median_mcd_db", {}))
            self.ordered.update(data.get("emotions", {}).get("ordered", {}).get("model", {}))
        else:
            raise ValueError("neither an evaluation (utterances) nor a round trip (mean_wer)")
        self.default_voice = data.get("default_voice", self.default_voice)


def load(paths: Sequence[Path], default_voice: str | None = None) -> Results:
    """:class:`Results` of the JSON files ``paths``; ``default_voice`` when none of them records it."""
    results = Results()
    for path in paths:
        try:
            results.add(json.loads(Path(path).read_text()))
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
    results.default_voice = results.default_voice or default_voice
    return results


@dataclass(frozen=True)
class Measure:
    """One row: ``value`` as shown (None: not measured); ``ok`` whether it meets ``goal`` (None: no goal to judge)."""

    label: str
    value: str | None
    goal: str
    ok: bool | None


def _row(label: str, value: float | None, shown: Callable[[float], str], goal: str = "",
         meets: Callable[[float], bool] | None = None) -> Measure:
    """A row of ``value`` (None or NaN: not measured) shown by ``shown``, judged by ``meets``."""
    if value is None or np.isnan(value):
        return Measure(label, None, goal, None)
    return Measure(label, shown(value), goal, None if meets is None else meets(value))


def measures(r: Results) -> list[Measure]:
    """The targets table of one side (see the module docstring)."""
    v = r.default_voice or ""
    model = r.asr_wer.get("model", {}).get(v)
    teacher = r.asr_wer.get("teacher", {}).get(v)
    ratio = model / teacher if model is not None and teacher else None
    teacher_name = CORPUS_VOICES[v].teacher_name if v in CORPUS_VOICES else "teacher"
    rows = [
        Measure("default voice", v or None, "", None),
        _row("default voice: ASR WER, mean over the held-out sentences", model,
             lambda x: f"{x:.3f} ({r.asr_sentences.get(v)} sentences)", f"<= {GOAL_WER:.2f}",
             lambda x: x <= GOAL_WER),
        _row("default voice: its teacher's ASR WER, same sentences", teacher, lambda x: f"{x:.3f} ({teacher_name})"),
        _row("default voice: WER / teacher's WER", ratio, lambda x: f"{x:.2f}", f"<= {GOAL_WER_RATIO}",
             lambda x: x <= GOAL_WER_RATIO),
        _row("default voice: MCD to the teacher, held-out sentences, median", r.asr_mcd.get(v), _db,
             f"<= {GOAL_DEFAULT_MCD_DB} dB", lambda x: x <= GOAL_DEFAULT_MCD_DB),
    ]
    return rows + (_full_measures(r.full, v) if r.full else _unmeasured_full()) + _held_out_order(r)


def _db(x: float) -> str:
    return f"{x:.2f} dB"


def _full_measures(full: Mapping[str, Any], voice: str) -> list[Measure]:
    from tts_triton.evaluate.measures import emotion_order, identity_correct

    utts = full["utterances"]
    own = [u["mcd_db"][u["voice"]] for u in utts if u["voice"] == voice]
    voices = list(full.get("voices") or dict.fromkeys(u["voice"] for u in utts))
    enough = len(voices) * len(EMOTIONS)
    identity = sum(identity_correct(u["mcd_db"], u["voice"]) for u in utts)
    stops = sum(u["hit_max_steps"] for u in utts)
    order = emotion_order(full["emotion_mean_f0_hz"]["synthesized"])
    return [
        _row("default voice: MCD to the teacher, test split, median", float(np.median(own)) if own else None,
             lambda x: f"{x:.2f} dB ({len(own)} sentences)", f"<= {GOAL_DEFAULT_MCD_DB} dB",
             lambda x: x <= GOAL_DEFAULT_MCD_DB),
        _row("median MCD to the target voice's teacher, test split, every voice", full["median_mcd_db"],
             lambda x: f"{x:.2f} dB ({len(utts)} sentences, {len(voices)} voices)",
             f"<= {GOAL_MEDIAN_MCD_DB} dB on >= 5 sentences per voice",
             lambda x: x <= GOAL_MEDIAN_MCD_DB and len(utts) >= enough),
        _row("voice identity (the nearest of the voices' renderings is the target's)", full["identity_pct"],
             lambda x: f"{identity} / {len(utts)} = {x:.0f} %", f">= {GOAL_IDENTITY_PCT:.0f} %",
             lambda x: x >= GOAL_IDENTITY_PCT),
        _row("stop failures (hit the max-steps guard)", full["stop_failure_pct"],
             lambda x: f"{stops} / {len(utts)} = {x:.1f} %", f"<= {GOAL_STOP_FAILURE_PCT:.0f} %",
             lambda x: x <= GOAL_STOP_FAILURE_PCT),
        _row("emotions ordered by mean F0, test split", full["emotion_order_pct"],
             lambda x: f"{sum(order.values())} / {len(order)} voices = {x:.0f} %",
             f">= {GOAL_EMOTION_ORDER_PCT:.0f} % of voices", lambda x: x >= GOAL_EMOTION_ORDER_PCT),
    ]


def _unmeasured_full() -> list[Measure]:
    goals = [("default voice: MCD to the teacher, test split, median", f"<= {GOAL_DEFAULT_MCD_DB} dB"),
             ("median MCD to the target voice's teacher, test split, every voice",
              f"<= {GOAL_MEDIAN_MCD_DB} dB on >= 5 sentences per voice"),
             ("voice identity (the nearest of the voices' renderings is the target's)",
              f">= {GOAL_IDENTITY_PCT:.0f} %"),
             ("stop failures (hit the max-steps guard)", f"<= {GOAL_STOP_FAILURE_PCT:.0f} %"),
             ("emotions ordered by mean F0, test split", f">= {GOAL_EMOTION_ORDER_PCT:.0f} % of voices")]
    return [Measure(label, None, goal, None) for label, goal in goals]


def _held_out_order(r: Results) -> list[Measure]:
    held = [v for v, ok in r.ordered.items() if ok]
    pct = 100.0 * len(held) / len(r.ordered) if r.ordered else None
    return [_row("emotions ordered by mean F0, held-out sentences (round-trip voices)", pct,
                 lambda x: f"{len(held)} / {len(r.ordered)} voices ({', '.join(r.ordered)}) = {x:.0f} %",
                 f">= {GOAL_EMOTION_ORDER_PCT:.0f} % of voices", lambda x: x >= GOAL_EMOTION_ORDER_PCT)]


def _mark(ok: bool | None) -> str:
    return "" if ok is None else ("**pass**" if ok else "FAIL")


def table(after: Results, before: Results | None = None) -> list[str]:
    """The targets as Markdown: ``after`` alone, or beside ``before`` with other voices' WERs (not worse than
    before, within :data:`WER_NOISE`)."""
    rows = measures(after)
    if before is None:
        lines = ["| measure | measured | target | |", "|---|---|---|---|"]
        lines += [f"| {m.label} | {m.value or NOT_MEASURED} | {m.goal} | {_mark(m.ok)} |" for m in rows]
        return lines
    lines = ["| measure | before | after | target | after meets it |", "|---|---|---|---|---|"]
    for b, a in zip(measures(before), rows, strict=True):
        cells = [a.label, b.value or NOT_MEASURED, a.value or NOT_MEASURED, a.goal, _mark(a.ok)]
        lines.append(f"| {' | '.join(cells)} |")
    model_before, model_after = before.asr_wer.get("model", {}), after.asr_wer.get("model", {})
    for voice in [v for v in model_after if v in model_before and v != after.default_voice]:
        x, y = model_before[voice], model_after[voice]
        lines.append(f"| ASR WER of {voice}, not the default voice after | {x:.3f} | {y:.3f} | not worse than before "
                     f"(+{WER_NOISE} noise) | {_mark(y <= x + WER_NOISE)} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tts_triton.evaluate.quality_targets",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--after", type=Path, nargs="+", required=True, help="JSON files of the new checkpoint")
    parser.add_argument("--before", type=Path, nargs="+", help="JSON files of the shipped checkpoint")
    parser.add_argument("--after-voice", help="the new side's default voice, when its JSON does not record it")
    parser.add_argument("--before-voice", help="the shipped side's default voice, when its JSON does not record it")
    parser.add_argument("--out", type=Path, help="write the Markdown table here too")
    args = parser.parse_args(argv)
    try:
        after = load(args.after, args.after_voice)
        before = load(args.before, args.before_voice) if args.before else None
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    sources = [f"- {side}: {', '.join(map(str, paths))}" for side, paths in (("before", args.before),
                                                                              ("after", args.after)) if paths]
    text = "\n".join([*table(after, before), "", *sources, ""])
    print_report(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
