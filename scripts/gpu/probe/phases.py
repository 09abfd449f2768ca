"""Snapshot or diff the network models' phase counters: `phases.py save FILE` | `phases.py diff FILE`.

Prints, per model over the interval: executions, Triton's compute_infer per execution (request-weighted),
the model's own execute phases per execution (tts_network_seconds_total), and the rest: the stub's hand-over."""
import json
import re
import sys
import urllib.request
from pathlib import Path

URL = "http://localhost:8002/metrics"


def read() -> dict[str, float]:
    with urllib.request.urlopen(URL, timeout=10) as page:
        text = page.read().decode()
    values = {}
    for line in text.splitlines():
        for name in ("tts_network_seconds_total", "nv_inference_compute_infer_duration_us", "nv_inference_exec_count",
                     "nv_inference_count"):
            if line.startswith(name + "{"):
                labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
                values[f"{name}|{labels['model']}|{labels.get('phase', '')}"] = float(line.rsplit(" ", 1)[1])
    return values


if sys.argv[1] == "save":
    Path(sys.argv[2]).write_text(json.dumps(read()))
else:
    before, after = json.loads(Path(sys.argv[2]).read_text()), read()
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    for model in ("text_encoder", "decoder", "vocoder"):
        execs = delta.get(f"nv_inference_exec_count|{model}|", 0.0)
        if not execs:
            continue
        # Triton adds a batch's compute time once per request in it: per request = an execution, request-weighted
        infer = delta[f"nv_inference_compute_infer_duration_us|{model}|"] / 1e3 / delta[f"nv_inference_count|{model}|"]
        phases = {p: delta.get(f"tts_network_seconds_total|{model}|{p}", 0.0) * 1e3 / execs
                  for p in ("inputs", "run", "responses")}
        rest = infer - sum(phases.values())
        print(f"{model}: {execs:.0f} executions; per execution compute_infer {infer:.2f} ms = "
              + ", ".join(f"{p} {v:.2f}" for p, v in phases.items()) + f", stub hand-over {rest:.2f} ms")
