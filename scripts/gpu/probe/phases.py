"""Where the network models' execute time goes: snapshot Triton's metrics, run some load, then diff.

    python3 scripts/gpu/probe/phases.py save before.json [--metrics-url URL]
    ... load (e.g. tts-triton bench --url ...) ...
    python3 scripts/gpu/probe/phases.py diff before.json [--metrics-url URL]

Prints, per network model over the interval: executions, Triton's compute_infer per execution
(request-weighted), the model's own execute phases per execution (``tts_network_seconds_total{phase}``, which
the torch-cuda models emit) and the rest: the Python stub's hand-over.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tts_triton.bench.prometheus import fetch_metrics, samples
from tts_triton.core.contract import PHASE_METRIC

NETWORKS = ("text_encoder", "decoder", "vocoder")
PHASES = ("inputs", "run", "responses")
COUNTERS = (PHASE_METRIC, "nv_inference_compute_infer_duration_us", "nv_inference_exec_count", "nv_inference_count")


def snapshot(page: str) -> dict[str, float]:
    """The counters of a metrics page as ``{"metric|model|phase": value}``."""
    return {f"{name}|{labels.get('model', '')}|{labels.get('phase', '')}": value
            for name in COUNTERS for labels, value in samples(page, name)}


def phase_lines(before: dict[str, float], after: dict[str, float]) -> list[str]:
    """One line per network that executed between the snapshots."""
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    lines = []
    for model in NETWORKS:
        execs = delta.get(f"nv_inference_exec_count|{model}|", 0.0)
        if not execs:
            continue
        # Triton adds a batch's compute time once per request in it: per request = per execution, request-weighted
        infer = delta[f"nv_inference_compute_infer_duration_us|{model}|"] / 1e3 / delta[f"nv_inference_count|{model}|"]
        phases = {p: delta.get(f"{PHASE_METRIC}|{model}|{p}", 0.0) * 1e3 / execs for p in PHASES}
        rest = infer - sum(phases.values())
        lines.append(f"{model}: {execs:.0f} executions; per execution compute_infer {infer:.2f} ms = "
                     + ", ".join(f"{p} {v:.2f}" for p, v in phases.items()) + f", stub hand-over {rest:.2f} ms")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("save", "diff"), help="save a snapshot, or diff against one")
    parser.add_argument("file", type=Path, help="the snapshot (JSON)")
    parser.add_argument("--metrics-url", default="http://localhost:8002/metrics",
                        help="Triton's metrics page (default %(default)s)")
    args = parser.parse_args(argv)
    page = fetch_metrics(args.metrics_url)
    if page is None:
        print(f"phases.py: no metrics page at {args.metrics_url}", file=sys.stderr)
        return 2
    if args.action == "save":
        args.file.write_text(json.dumps(snapshot(page)))
        return 0
    lines = phase_lines(json.loads(args.file.read_text()), snapshot(page))
    print("\n".join(lines) or "no network executed in the interval")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
