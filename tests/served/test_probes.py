"""The measuring tools under scripts/gpu/probe/: each answers --help, and each runs on this CPU host as far as it
can (the GPU-only one refuses cleanly); the metrics arithmetic of phases.py on a real page."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run_on_a_bare_host

from tts_triton.bench.goals import Ceiling
from tts_triton.core import audio

PROBES = Path(__file__).parents[2] / "scripts" / "gpu" / "probe"
# loaded from its file: the folder is not a package, and on sys.path its trace.py would shadow the stdlib's
_spec = importlib.util.spec_from_file_location("probe_phases", PROBES / "phases.py")
assert _spec is not None and _spec.loader is not None
phases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(phases)

CPU_METRICS = (Path(__file__).parents[1] / "data" / "triton_metrics_cpu.txt").read_text()


def _run(script: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(PROBES / script), *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.mark.parametrize("script", ["trace.py", "phases.py", "memory.py", "pipeline_overhead.py", "style.py",
                                    "voice.py", "vocoder_speed.py", "ceiling.py", "hot_paths.py"])
def test_every_probe_answers_help(script: str) -> None:
    done = _run(script, "--help", timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:")


def _phase_lines(decoder_execs: int, infer_us: float, run_s: float) -> str:
    return (f'nv_inference_exec_count{{model="decoder",version="1"}} {decoder_execs}\n'
            f'nv_inference_count{{model="decoder",version="1"}} {2 * decoder_execs}\n'
            f'nv_inference_compute_infer_duration_us{{model="decoder",version="1"}} {infer_us}\n'
            f'tts_network_seconds_total{{model="decoder",phase="run"}} {run_s}\n'
            f'tts_network_seconds_total{{model="decoder",phase="inputs"}} 0\n')


def test_phases_split_compute_into_the_models_phases_and_the_hand_over() -> None:
    before = phases.snapshot(CPU_METRICS + _phase_lines(10, 20_000.0, 0.010))
    after = phases.snapshot(CPU_METRICS + _phase_lines(110, 420_000.0, 0.160))
    # 100 executions of 200 requests: 400 ms of compute_infer -> 2 ms per request-weighted execution; run 1.5 ms
    assert phases.phase_lines(before, after) == [
        "decoder: 100 executions; per execution compute_infer 2.00 ms = inputs 0.00, run 1.50, responses 0.00, "
        "stub hand-over 0.50 ms"]
    assert phases.phase_lines(after, after) == []


def test_memory_refuses_without_cuda() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this host has CUDA")
    done = _run("memory.py", "decoder", "4", timeout=120)
    assert done.returncode == 2 and "needs a CUDA GPU" in done.stderr


def test_pipeline_overhead_runs_on_the_cpu() -> None:
    done = _run("pipeline_overhead.py", "--requests", "3", "--warmup", "1")
    assert done.returncode == 0, done.stderr
    assert "instant backend, medians of 3: first chunk" in done.stdout
    done = _run("pipeline_overhead.py", "--streams", "4", "--seconds", "1")
    assert done.returncode == 0, done.stderr
    cpu_ms = float(done.stdout.split("requests: ")[1].split()[0])
    assert "4 streams coalesced" in done.stdout and 0 < cpu_ms < 100


def test_vocoder_speed_times_each_variant_on_the_cpu_without_the_client_stack(tmp_path: Path) -> None:
    """It runs with the GPU host's own Python (torch, numpy), as the trainers do: beside a training run."""
    out = tmp_path / "speed.md"
    done = run_on_a_bare_host(str(PROBES / "vocoder_speed.py"), "--batches", "1", "--calls", "1", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line.split("|")[1:-1] for line in out.read_text().splitlines() if line.startswith("| v2") or
            line.startswith("| vocos")]
    assert [(r[0].strip(), r[3].strip()) for r in rows] == [("v2", "48"), ("v2", "96"), ("vocos", "48"),
                                                            ("vocos", "96")]
    assert all(float(r[4]) > 0 for r in rows) and rows[0][6].strip() == "1.00"


@pytest.mark.slow
def test_trace_breaks_a_first_chunk_into_hops_on_the_cpu_server(tmp_path: Path) -> None:
    done = _run("trace.py", "--model-repository", str(tmp_path / "repo"), "--warmup", "1", "--requests", "2",
                timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| client -> server (gRPC read) |" in done.stdout
    assert "BLS to the first chunk" in done.stdout


def test_style_matches_the_checkpoint_on_the_cpu_server(server, checkpoint_file: Path, tmp_path: Path) -> None:
    """The CPU target serves fp32: the served style is the in-process one."""
    import soundfile as sf

    # 3 s of a chirp in noise: the test model's own speech is too short for a reference
    t = np.arange(3 * 16_000) / 16_000
    reference = 0.3 * np.sin(2 * np.pi * (150 + 100 * t) * t) + 0.05 * np.random.default_rng(0).standard_normal(t.size)
    sf.write(tmp_path / "ref.wav", reference.astype(np.float32), 16_000)
    done = _run("style.py", str(tmp_path / "ref.wav"), "--url", server.grpc_url, "--checkpoint", str(checkpoint_file),
                "--requests", "2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    cosines = [float(line.split("cosine ")[1].split(",")[0]) for line in lines if line.startswith("style of")]
    assert len(cosines) == 3 and min(cosines) > 0.9999, lines
    assert [line.split(":")[0] for line in lines[3:]] == ["preset voice", "reference audio"]
    assert np.isfinite([float(line.split("p50 ")[1].split(" ms")[0]) for line in lines[3:]]).all()


def test_voice_matches_the_checkpoint_on_the_cpu_server(server, checkpoint_file: Path, model_repository: Path,
                                                        tmp_path: Path) -> None:
    """The CPU target serves fp32: the served voice is the in-process one, frame for frame; ``--save`` keeps it."""
    bank = model_repository / "tts" / "voice_bank.json"
    done = _run("voice.py", "--url", server.grpc_url, "--checkpoint", str(checkpoint_file), "--voice-bank", str(bank),
                "--sentences", "2", "--save", str(tmp_path / "clips.npz"))
    assert done.returncode == 0, done.stderr
    with np.load(tmp_path / "clips.npz") as saved:
        assert sorted(saved.files) == ["arr_0", "arr_1"] and all(saved[f].size > 0 for f in saved.files)
    *per_sentence, summary = done.stdout.splitlines()
    assert len(per_sentence) == 2 and "same length 2/2" in summary, done.stdout
    for line in per_sentence:
        served, local = line.split(" frames")[0].split(" / ")
        assert served == local and float(line.split("SNR ")[1].split(" dB")[0]) >= 30.0, line


def test_ceiling_times_the_served_decoder_and_vocoder_on_the_cpu_without_the_client_stack(tmp_path: Path) -> None:
    """The shipped voice's two networks at the served K and windows; x real time follows from the two times."""
    out = tmp_path / "ceiling.md"
    done = run_on_a_bare_host(str(PROBES / "ceiling.py"), "--batches", "1", "2", "--calls", "1", "--out", str(out),
                              "--json", str(tmp_path / "ceiling.json"))
    assert done.returncode == 0, done.stderr[-3000:]
    text = out.read_text()
    assert "K=16 x r=3" in text and "windows of 96 frames" in text
    assert "- CPU: " in text and ", kernel " in text  # the host named
    assert Ceiling.load(tmp_path / "ceiling.json").streams in (1, 2)  # the bench's --ceiling reads it
    rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in text.splitlines()
            if line.startswith("| 1 |") or line.startswith("| 2 |")]
    assert len(rows) == 2
    for streams, dec, voc, _, x in rows:
        per_frame = float(dec) / (int(streams) * 48) + float(voc) / (int(streams) * 72)
        expected = 1e3 / per_frame / (audio.SAMPLE_RATE / audio.HOP_LENGTH)
        assert float(x.replace(",", "")) == pytest.approx(expected, rel=0.05, abs=1)  # the table's rounding


def test_hot_paths_sums_py_spy_stacks_by_process_kind_and_names_what_is_missing(tmp_path: Path) -> None:
    """py-spy's raw format, two BLS processes and one network stub: shares per kind, self and inclusive, by function
    whatever its line; a missing py-spy or a pid that is no server's is refused with its reason."""
    loop = "_run_once (asyncio/base_events.py:1922)"
    (tmp_path / "stub_tts-10.txt").write_text(
        f"{loop};decode (tts_triton/serving/pipeline.py:210);infer (tts_triton/triton/bls.py:95) 30\n"
        f"{loop};decode (tts_triton/serving/pipeline.py:233);estimate (tts_triton/core/fundamental.py:90) 10\n")
    (tmp_path / "stub_tts-11.txt").write_text(f"{loop};chunk_response (tts_triton/triton/bls.py:236) 60\n")
    (tmp_path / "stub_decoder-12.txt").write_text("execute (tts_triton/triton/torch_model.py:120) 5\n")
    done = _run("hot_paths.py", "summary", str(tmp_path), "--out", str(tmp_path / "summary.md"))
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "summary.md").read_text()
    assert text.index("## stub tts: 100 samples") < text.index("## stub decoder: 5 samples")  # busiest first
    assert "| 60.0 % | chunk_response (bls.py) |" in text and "| 30.0 % | infer (bls.py) |" in text  # self
    assert "| 40.0 % | decode (pipeline.py) |" in text  # inclusive: both of its lines
    missing = _run("hot_paths.py", "record", "--server", "1", "--out", str(tmp_path), "--py-spy", "no-such-py-spy")
    assert missing.returncode == 2 and "no-such-py-spy: no such program" in missing.stderr
    with subprocess.Popen(["sleep", "60"]) as childless:
        alone = _run("hot_paths.py", "record", "--server", str(childless.pid), "--out", str(tmp_path),
                     "--py-spy", "true")
        childless.kill()
    assert alone.returncode == 2 and "no process has it as its parent" in alone.stderr
