"""Trainers: one tiny step of each on a tiny rendered corpus, resume round trips, merge/ship, loss pieces."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import TINY, run_on_a_bare_host

from tts_triton.core import audio
from tts_triton.core.config import DecoderConfig, ModelConfig
from tts_triton.data.dataset import AcousticDataset, Corpus, VocoderDataset
from tts_triton.data.prosody import VOICES
from tts_triton.export import release
from tts_triton.models.checkpoint import Checkpoint, init_checkpoint, load_checkpoint
from tts_triton.models.style_encoder import StyleEncoder
from tts_triton.training import gta, hifigan_losses, loop, merge, schedule, train_acoustic, train_vocoder

needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")

@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Iterator[None]:
    """Tiny models: more intra-op threads only add synchronisation (and stall on a busy machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 utterances: one test sentence in 10 voices, one validation and six train sentences in 2 voices each."""
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed")
    out = tmp_path_factory.mktemp("corpus") / "data"
    subprocess.run([sys.executable, "-m", "tts_triton.data.corpus", "build", "--out", str(out), "--limit", "24",
                    "--voices", ",".join(VOICES), "--repeats", "2", "--jobs", "1", "--quiet"],
                   check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def tiny_init(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("init") / "tiny.pt"
    init_checkpoint(TINY, seed=3).save(path)
    return path


def _same(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@needs_espeak
def test_acoustic_step_and_resume(corpus: Path, tiny_init: Path, tmp_path: Path) -> None:
    flags = ["--data", str(corpus), "--batch-size", "4", "--workers", "0", "--val-utterances", "1", "--device", "cpu"]
    assert train_acoustic.main([*flags, "--init", str(tiny_init), "--out", str(tmp_path / "a"), "--steps", "2"]) == 0
    first = load_checkpoint(tmp_path / "a" / "checkpoint.pt")
    init = load_checkpoint(tiny_init)
    assert first.config == TINY and first.info["acoustic"]["steps"] == 2
    assert not _same(first.acoustic, init.acoustic) and _same(first.generator, init.generator)
    assert not first.trained  # the vocoder part has no steps yet
    rows = [json.loads(line) for line in (tmp_path / "a" / "losses.jsonl").read_text().splitlines()]
    assert rows[-1]["kind"] == "val" and np.isfinite(rows[-1]["total"]) and rows[-1]["free_len_ratio"] > 0
    assert (tmp_path / "a" / "latest.png").stat().st_size > 0 and (tmp_path / "a" / "losses.png").exists()

    resumed_out = tmp_path / "b"
    assert train_acoustic.main([*flags, "--init", str(tmp_path / "a" / "checkpoint.pt"), "--out", str(resumed_out),
                                "--steps", "3"]) == 0
    resumed = load_checkpoint(resumed_out / "checkpoint.pt")
    record = resumed.info["acoustic"]
    assert record["steps"] == 3
    assert [(r["from_step"], r["to_step"]) for r in record["runs"]] == [(0, 2), (2, 3)]
    assert [h["step"] for h in record["history"]] == [2, 3]

    # --resume continues run "a" in place: its optimizer moments come back (Adam's step count goes on).
    assert train_acoustic.main([*flags, "--resume", "--out", str(tmp_path / "a"), "--steps", "4"]) == 0
    state = torch.load(tmp_path / "a" / "state.pt")
    assert state["optimizer_start"] == 0 and int(state["optimizer"]["state"][0]["step"]) == 4
    assert load_checkpoint(tmp_path / "a" / "checkpoint.pt").info["acoustic"]["steps"] == 4


@pytest.mark.slow
@needs_espeak
def test_vocoder_step_and_resume(corpus: Path, tiny_init: Path, tmp_path: Path) -> None:
    flags = ["--data", str(corpus), "--batch-size", "2", "--segment-frames", "8", "--workers", "0",
             "--val-utterances", "1", "--device", "cpu", "--gan-start", "1", "--d-warmup", "0",
             "--narrow-discriminators", "16"]
    assert train_vocoder.main([*flags, "--init", str(tiny_init), "--out", str(tmp_path / "v"), "--steps", "2"]) == 0
    first = load_checkpoint(tmp_path / "v" / "checkpoint.pt")
    init = load_checkpoint(tiny_init)
    assert first.info["vocoder"]["steps"] == 2 and np.isfinite(first.info["vocoder"]["last_val"]["mel_l1"])
    assert _same(first.acoustic, init.acoustic) and not _same(first.generator, init.generator)
    assert (tmp_path / "v" / "sample.wav").stat().st_size > 44

    assert train_vocoder.main([*flags, "--init", str(tmp_path / "v" / "checkpoint.pt"), "--out",
                               str(tmp_path / "w"), "--steps", "3"]) == 0
    assert load_checkpoint(tmp_path / "w" / "checkpoint.pt").info["vocoder"]["steps"] == 3

    # --resume keeps the discriminators, both optimizers and where the schedules started.
    before = torch.load(tmp_path / "v" / "state.pt")
    assert train_vocoder.main([*flags, "--resume", "--out", str(tmp_path / "v"), "--steps", "4"]) == 0
    after = torch.load(tmp_path / "v" / "state.pt")
    assert (after["d_start"], after["optimizer_start"]) == (before["d_start"], 0) == (1, 0)
    assert int(after["opt_d"]["state"][0]["step"]) == int(before["opt_d"]["state"][0]["step"]) + 2
    assert load_checkpoint(tmp_path / "v" / "checkpoint.pt").info["vocoder"]["steps"] == 4


@needs_espeak
def test_a_vocoder_run_can_start_an_stft_generator_beside_the_acoustic_model(corpus: Path, tiny_init: Path,
                                                                            tmp_path: Path) -> None:
    flags = ["--data", str(corpus), "--batch-size", "2", "--segment-frames", "8", "--workers", "0",
             "--val-utterances", "1", "--device", "cpu", "--gan-start", "1", "--d-warmup", "0",
             "--narrow-discriminators", "16", "--discriminators", "mpd+mrd", "--init", str(tiny_init),
             "--vocoder-variant", "vocos"]
    assert train_vocoder.main([*flags, "--out", str(tmp_path / "v"), "--steps", "2"]) == 0
    trained = load_checkpoint(tmp_path / "v" / "checkpoint.pt")
    assert trained.config.vocoder.variant == "vocos" and trained.info["vocoder"]["steps"] == 2
    assert _same(trained.acoustic, load_checkpoint(tiny_init).acoustic)
    assert np.isfinite(trained.info["vocoder"]["last_val"]["mel_l1"])
    # the next run from it keeps its generator and its steps (the flag names the variant it already has)
    assert train_vocoder.main([*flags[:-4], "--init", str(tmp_path / "v" / "checkpoint.pt"), "--vocoder-variant",
                               "vocos", "--out", str(tmp_path / "w"), "--steps", "3"]) == 0
    again = load_checkpoint(tmp_path / "w" / "checkpoint.pt")
    assert again.info["vocoder"]["steps"] == 3 and _same(again.acoustic, trained.acoustic)
    # a resumed run keeps its discriminators: another set is refused by name
    with pytest.raises(SystemExit, match="--discriminators mpd\\+msd: the run resumed trained mpd\\+mrd"):
        train_vocoder.main([*flags[:-8], "--discriminators", "mpd+msd", "--resume", "--out", str(tmp_path / "w"),
                            "--steps", "4"])


@needs_espeak
def test_discriminators_warm_up_alone(corpus: Path, tiny_init: Path, tmp_path: Path) -> None:
    """During --d-warmup the generator waits: it leaves the warm-up as it came, the discriminators trained."""
    flags = ["--data", str(corpus), "--init", str(tiny_init), "--batch-size", "2", "--segment-frames", "8",
             "--workers", "0", "--val-utterances", "1", "--device", "cpu", "--gan-start", "0",
             "--narrow-discriminators", "16", "--discriminators", "mpd+mrd", "--d-warmup", "2"]
    assert train_vocoder.main([*flags, "--out", str(tmp_path / "v"), "--steps", "2"]) == 0
    assert _same(load_checkpoint(tmp_path / "v" / "checkpoint.pt").generator, load_checkpoint(tiny_init).generator)
    state = torch.load(tmp_path / "v" / "state.pt")
    assert int(state["opt_d"]["state"][0]["step"]) == 2 and not state["opt_g"]["state"]
    rows = [json.loads(line) for line in (tmp_path / "v" / "losses.jsonl").read_text().splitlines()]
    assert rows[-1]["kind"] == "val"
    # past the warm-up both train, the generator's learning rate warming up from there
    assert train_vocoder.main([*flags, "--resume", "--out", str(tmp_path / "v"), "--steps", "3"]) == 0
    state = torch.load(tmp_path / "v" / "state.pt")
    assert int(state["opt_g"]["state"][0]["step"]) == 1 and int(state["opt_d"]["state"][0]["step"]) == 3
    assert not _same(load_checkpoint(tmp_path / "v" / "checkpoint.pt").generator,
                     load_checkpoint(tiny_init).generator)


@needs_espeak
def test_half_life_decays_both_learning_rates_from_the_adversarial_phase(corpus: Path, tiny_init: Path,
                                                                          tmp_path: Path) -> None:
    """The decay counts from the end of the discriminators' warm-up and goes on where a resumed run left it."""
    flags = ["--data", str(corpus), "--batch-size", "2", "--segment-frames", "8", "--workers", "0",
             "--val-utterances", "1", "--device", "cpu", "--gan-start", "1", "--d-warmup", "1", "--warmup", "1",
             "--narrow-discriminators", "16", "--discriminators", "mpd+mrd", "--lr", "1e-3", "--half-life", "1",
             "--out", str(tmp_path / "v")]

    def rates() -> tuple[float, float]:
        state = torch.load(tmp_path / "v" / "state.pt")
        return state["opt_g"]["param_groups"][0]["lr"], state["opt_d"]["param_groups"][0]["lr"]

    assert train_vocoder.main([*flags, "--init", str(tiny_init), "--steps", "4"]) == 0
    assert rates() == pytest.approx((5e-4, 5e-4))  # the last step (3) is one past the decay's start (1 + 1)
    assert train_vocoder.main([*flags, "--resume", "--steps", "8"]) == 0
    assert rates() == pytest.approx((1e-3 * train_vocoder.LR_FLOOR,) * 2)  # 0.5 ** 5 is under the floor


@needs_espeak
def test_phase_weight_adds_the_phase_term_and_is_recorded(corpus: Path, tiny_init: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(train_vocoder.VocoderRun, "log_every", 1)
    flags = ["--data", str(corpus), "--init", str(tiny_init), "--batch-size", "2", "--segment-frames", "8",
             "--workers", "0", "--val-utterances", "1", "--device", "cpu", "--gan-start", "5",
             "--narrow-discriminators", "16", "--phase-weight", "2", "--out", str(tmp_path / "v")]
    assert train_vocoder.main([*flags, "--steps", "2"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "v" / "losses.jsonl").read_text().splitlines()]
    phases = [row["phase"] for row in rows if "phase" in row]
    assert phases and all(0 < p <= 2 * 4 for p in phases)  # two terms of at most 2 each, weighted 2
    assert load_checkpoint(tmp_path / "v" / "checkpoint.pt").info["vocoder"]["phase_weight"] == 2


@needs_espeak
def test_checkpoints_hold_the_generators_moving_average(corpus: Path, tiny_init: Path, tmp_path: Path) -> None:
    flags = ["--data", str(corpus), "--batch-size", "2", "--segment-frames", "8", "--workers", "0",
             "--val-utterances", "1", "--device", "cpu", "--gan-start", "5", "--narrow-discriminators", "16",
             "--ema", "0.5", "--out", str(tmp_path / "v")]
    assert train_vocoder.main([*flags, "--init", str(tiny_init), "--steps", "1"]) == 0
    shipped = load_checkpoint(tmp_path / "v" / "checkpoint.pt").generator.state_dict()
    trained = torch.load(tmp_path / "v" / "state.pt")["generator"]
    init = load_checkpoint(tiny_init).generator.state_dict()
    # one step at decay 0.5: halfway between the file's weights and the trained ones
    assert all(torch.allclose(shipped[k], (init[k] + trained[k]) / 2, atol=1e-6) for k in init)
    assert not all(torch.equal(trained[k], init[k]) for k in init)
    # a resumed run goes on from the trained weights, not the average
    assert train_vocoder.main([*flags, "--resume", "--steps", "2"]) == 0
    resumed = torch.load(tmp_path / "v" / "state.pt")["generator"]
    assert load_checkpoint(tmp_path / "v" / "checkpoint.pt").info["vocoder"]["steps"] == 2
    assert not all(torch.equal(resumed[k], trained[k]) for k in init)


@needs_espeak
@pytest.mark.parametrize("trainer", ["train_acoustic", "train_vocoder"])
def test_trainers_run_without_the_client_stack(trainer: str, corpus: Path, tiny_init: Path, tmp_path: Path) -> None:
    flags = ["--data", str(corpus), "--init", str(tiny_init), "--out", str(tmp_path / "run"), "--steps", "1",
             "--workers", "0", "--val-utterances", "1", "--device", "cpu", "--batch-size", "2"]
    if trainer == "train_vocoder":
        flags += ["--segment-frames", "8", "--narrow-discriminators", "16"]
    done = run_on_a_bare_host(f"tts_triton.training.{trainer}", *flags, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "run" / "checkpoint.pt").exists()
    if trainer == "train_vocoder":
        assert (tmp_path / "run" / "sample.wav").stat().st_size > 44


@pytest.mark.slow
@needs_espeak
def test_vocoder_data_parallel_ranks_agree(corpus: Path, tiny_init: Path, tmp_path: Path) -> None:
    """Two CPU ranks (gloo) under torch.distributed.run: both stop at the same step, rank 0 writes, resume works."""
    out = tmp_path / "ddp"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m",
               "tts_triton.training.train_vocoder", "--data", str(corpus), "--init", str(tiny_init), "--out", str(out),
               "--batch-size", "2", "--segment-frames", "8", "--workers", "0", "--val-utterances", "1",
               "--device", "cpu", "--gan-start", "1", "--d-warmup", "1", "--resume", "--narrow-discriminators", "16"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for steps in (3, 5):
        done = subprocess.run([*command, "--steps", str(steps)], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        record = load_checkpoint(out / "checkpoint.pt").info["vocoder"]
        assert record["steps"] == steps and record["batch_size"] == 4
        assert "torch.distributed.run --standalone --nproc-per-node 2 -m" in record["runs"][-1]["command"]
    assert "x 2 ranks" in done.stdout and done.stdout.count("[vocoder] done at step 5") == 1
    assert int(torch.load(out / "state.pt")["opt_d"]["state"][0]["step"]) == 4  # D trained from step 1, resumed


class ScalarRun(loop.TrainingRun):
    """The skeleton driving one scalar weight towards 1; ``scales`` multiply the loss (NaN: a non-finite step)."""

    part, module, log_every, loss_keys = "vocoder", "scalar", 2, ("total",)

    def __init__(self, args: argparse.Namespace, scales: list[float]) -> None:
        super().__init__(args, ["--scalar"])
        self.weight = torch.nn.Parameter(torch.zeros(()))
        self.optimizer = torch.optim.SGD([self.weight], lr=0.1)
        self.scales, self.calls = iter(scales), 0

    def forward_backward(self) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        self.calls += 1
        loss = (self.weight - 1) ** 2 * next(self.scales)
        self.optimizer.zero_grad()
        loss.backward()
        return {"total": loss}, loss

    def optimizer_step(self) -> None:
        self.optimizer.step()

    def validate(self, plot: Path) -> dict[str, float]:
        plot.parent.mkdir(parents=True, exist_ok=True)
        plot.write_bytes(b"plot")
        return {"distance": abs(1 - float(self.weight.detach()))}

    def record(self) -> dict[str, Any]:
        return {"lr": 0.1}

    def checkpoint(self, info: dict[str, Any]) -> Checkpoint:
        return Checkpoint(self.ckpt.config, self.ckpt.acoustic, self.ckpt.generator, False, info)

    def training_state(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict()}


def scalar_args(init: Path, out: Path, steps: int | None, minutes: float | None = None,
                profile: int = 0) -> argparse.Namespace:
    return argparse.Namespace(out=out, init=init, resume=False, minutes=minutes, steps=steps, val_every=2, seed=0,
                              device="cpu", frames_per_step=3, vocoder_variant="v2", profile=profile)


def test_training_skeleton_logs_validates_saves_and_skips(tiny_init: Path, tmp_path: Path) -> None:
    run = ScalarRun(scalar_args(tiny_init, tmp_path, steps=5), [1.0, math.nan, 1.0, 1.0, 1.0, 1.0])
    assert run.run() == 0 and run.step == 5 and run.skipped == 1 and run.calls == 6
    rows = [json.loads(line) for line in (tmp_path / "losses.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["step"]) for r in rows] == [("train", 2), ("val", 2), ("train", 4), ("val", 4), ("val", 5)]
    record = load_checkpoint(tmp_path / "checkpoint.pt").info["vocoder"]
    assert record["steps"] == 5 and record["lr"] == 0.1 and [h["step"] for h in record["history"]] == [2, 4, 5]
    assert [(r["from_step"], r["to_step"]) for r in record["runs"]] == [(0, 5)]
    assert record["last_val"]["distance"] < 1 and torch.load(tmp_path / "state.pt")["optimizer_start"] == 0


def test_profile_records_typical_steps_into_a_table(tiny_init: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ScalarRun, "steps_before_profile", lambda self: 1)
    run = ScalarRun(scalar_args(tiny_init, tmp_path, steps=7, profile=3), [1.0] * 7)
    assert run.run() == 0
    table = (tmp_path / "profile.txt").read_text()
    assert table.startswith("3 steps: wall ") and "cpu busy" in table and "aten::" in table
    # a run that ends before its recorded steps writes none
    short = ScalarRun(scalar_args(tiny_init, tmp_path / "short", steps=4, profile=3), [1.0] * 4)
    assert short.run() == 0 and not (tmp_path / "short" / "profile.txt").exists()


def test_training_skeleton_gives_up_after_the_nonfinite_limit(tiny_init: Path, tmp_path: Path) -> None:
    run = ScalarRun(scalar_args(tiny_init, tmp_path, steps=100), [math.nan] * 100)
    with pytest.raises(RuntimeError, match="non-finite"):
        run.run()
    assert run.calls == loop.MAX_NONFINITE_STEPS + 1 and run.step == 0


def test_training_skeleton_stops_when_the_budget_is_spent(tiny_init: Path, tmp_path: Path) -> None:
    run = ScalarRun(scalar_args(tiny_init, tmp_path, steps=None, minutes=0.0), [])
    assert run.run() == 0 and run.calls == 0
    assert load_checkpoint(tmp_path / "checkpoint.pt").info["vocoder"]["history"] == [{"step": 0, "distance": 1.0}]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA device")
def test_a_captured_phase_replays_the_eager_gradients_on_new_inputs() -> None:
    from tts_triton.training.step_graphs import CapturedPhase

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).cuda()
    x = torch.randn(4, 8, device="cuda")

    def phase() -> torch.Tensor:
        loss = model(x).square().mean()
        loss.backward()
        return loss.detach()

    graph = CapturedPhase(phase, model.parameters())
    x.copy_(torch.randn(4, 8, device="cuda"))
    replayed = float(graph.replay())
    grads = [p.grad.clone() for p in model.parameters()]
    for p in model.parameters():
        p.grad = None
    assert math.isclose(replayed, float(phase()), rel_tol=1e-5)
    assert all(torch.allclose(g, p.grad) for g, p in zip(grads, model.parameters(), strict=True))


def test_frozen_discriminators_give_the_same_generator_gradients() -> None:
    torch.manual_seed(0)
    # eval: spectral norm's power iteration would otherwise move between the two passes
    mpd, msd = hifigan_losses.MultiPeriodDiscriminator().eval(), hifigan_losses.MultiScaleDiscriminator().eval()
    real, raw = torch.randn(2, 1, 2048), torch.randn(2, 1, 2048, requires_grad=True)
    grads = []
    for freeze in (False, True):
        raw.grad = None
        with train_vocoder.frozen(mpd, msd) if freeze else contextlib.nullcontext():
            hifigan_losses.generator_step_losses(real, raw * 0.5, [mpd, msd], True, contextlib.nullcontext(),
                                                stft_weight=1.0)["total"].backward()
        grads.append(raw.grad.clone())
    assert all(p.grad is not None for p in mpd.parameters())  # from the unfrozen pass only
    assert all(p.requires_grad for p in [*mpd.parameters(), *msd.parameters()])
    torch.testing.assert_close(grads[0], grads[1])


@needs_espeak
def test_gta_corpus_holds_teacher_forced_mels(corpus: Path, tiny_init: Path, tmp_path: Path) -> None:
    ckpt = load_checkpoint(tiny_init)
    assert gta.write_gta(corpus, ckpt, tmp_path / "gta", ["train"], batch_size=4) == 12
    original, carried = Corpus(corpus), Corpus(tmp_path / "gta")
    assert carried.summary["gta"]["splits"] == ["train"]
    for before, after in zip(original.entries, carried.entries, strict=True):
        assert before == after
        np.testing.assert_array_equal(carried.audio(after), original.audio(before))
        changed = not np.array_equal(carried.mel(after), original.mel(before))
        assert changed == (before.split == "train"), before.id
    # The first batch again, the same way: each row landed at its own utterance's frames of the shard.
    torch.manual_seed(1234)
    dataset = AcousticDataset(original, "train", seed=1234)
    batch = next(iter(train_acoustic.epoch_loader(dataset, 4, ckpt.config.decoder.frames_per_step, 1234, 0, 0)))
    with torch.no_grad():
        predicted = train_acoustic.teacher_forced(ckpt.acoustic.eval(), batch).mel_post.numpy()
    by_id = {e.id: e for e in carried.entries}
    for row, utterance in enumerate(batch["id"]):
        e = by_id[utterance]
        np.testing.assert_allclose(carried.mel(e), predicted[row, : e.n_frames], rtol=0, atol=2e-2)  # float16
    segment = VocoderDataset(tmp_path / "gta", "train", 8, seed=0)[0]
    assert segment[0].shape == (8, ckpt.config.n_mels) and segment[1].shape == (8 * audio.HOP_LENGTH,)


@needs_espeak
def test_gta_of_some_voices_keeps_the_others_mels(corpus: Path, tiny_init: Path, tmp_path: Path) -> None:
    original = Corpus(corpus)
    voice = original.split("train")[0].voice
    n = gta.write_gta(corpus, load_checkpoint(tiny_init), tmp_path / "gta", ["train"], batch_size=4, voices=[voice])
    carried = Corpus(tmp_path / "gta")
    assert carried.summary["gta"]["voices"] == [voice]
    assert n == sum(e.voice == voice for e in original.split("train")) < len(original.split("train"))
    for before, after in zip(original.entries, carried.entries, strict=True):
        changed = not np.array_equal(carried.mel(after), original.mel(before))
        assert changed == (before.split == "train" and before.voice == voice), before.id
    with pytest.raises(ValueError, match="of the voices nobody"):
        gta.write_gta(corpus, load_checkpoint(tiny_init), tmp_path / "none", ["train"], voices=["nobody"])


def test_vocoder_validation_measures_against_the_recorded_audio(corpus: Path, tiny_init: Path, tmp_path: Path) -> None:
    """On a teacher-forced corpus a generator that gives back the recorded audio scores ~0, though the
    corpus's mels (an untrained model's predictions) are far from that audio's mels."""
    gta.write_gta(corpus, load_checkpoint(tiny_init), tmp_path / "gta", ["val"], batch_size=4)
    dataset = VocoderDataset(tmp_path / "gta", "val", None)
    pairs = [dataset[i] for i in range(len(dataset))]
    recorded = iter(samples for _, samples in pairs)
    replay = torch.nn.Module()
    replay.forward = lambda mel: next(recorded)[None, None]  # type: ignore[method-assign]
    assert train_vocoder.validate(replay, dataset, torch.device("cpu"), None, None, 0)["mel_l1"] < 0.05
    mel, samples = pairs[0]
    assert float((audio.mel_spectrogram_torch(samples[None])[0] - mel).abs().mean()) > 0.5


def _parts() -> tuple[Checkpoint, Checkpoint]:
    """Two tiny checkpoints that claim a trained acoustic model and a trained vocoder respectively."""
    a, v = init_checkpoint(TINY, seed=1), init_checkpoint(TINY, seed=2)
    a.info = {"acoustic": {"steps": 5}, "commands": ["train acoustic"]}
    v.info = {"vocoder": {"steps": 7}, "commands": ["train vocoder"]}
    return a, v


def test_merge_takes_each_trained_part() -> None:
    a, v = _parts()
    merged = merge.merge(a, v, "merge")
    assert merged.trained and merged.info["name"] == "default"
    assert _same(merged.acoustic, a.acoustic) and _same(merged.generator, v.generator)
    assert merged.info["commands"] == ["train acoustic", "train vocoder", "merge"]
    assert not merge.merge(a, init_checkpoint(TINY), None).trained
    with pytest.raises(ValueError, match="different configs"):
        merge.merge(a, init_checkpoint(ModelConfig()))


def test_default_size_checkpoint_fits_in_fp16(tmp_path: Path) -> None:
    path = tmp_path / "full.pt"
    init_checkpoint(ModelConfig(decoder=dataclasses.replace(DecoderConfig(), frames_per_step=3))).save(path, half=True)
    assert path.stat().st_size <= 25 * 2**20


@needs_espeak
def test_ship_writes_default_and_voice_bank(tmp_path: Path) -> None:
    from tts_triton.core.voices import VoiceBank

    out = tmp_path / "assets" / "default_voice.pt"
    with pytest.raises(ValueError, match="not trained"):
        release.ship(init_checkpoint(TINY), out, 1, None, "ship")
    bank_path = release.ship(merge.merge(*_parts()), out, 1, {"median_mcd_db": 9.0}, "ship")
    shipped = load_checkpoint(out)
    assert shipped.trained and shipped.info["metrics"] == {"median_mcd_db": 9.0}
    assert shipped.info["commands"][-1] == "ship"
    assert all(v.dtype == torch.float16 for v in torch.load(out, weights_only=False)["acoustic"].values()
               if v.is_floating_point())
    bank = VoiceBank.load(bank_path)
    assert len(bank.voices) * len(bank.emotions) == 50 and len(bank.style()) == TINY.style.dim


def test_guided_attention_prefers_the_diagonal() -> None:
    steps, tokens = torch.tensor([20]), torch.tensor([10])
    eye = torch.zeros(1, 24, 12)
    anti = torch.zeros(1, 24, 12)
    for n in range(20):
        eye[0, n, n * 10 // 20] = 1.0
        anti[0, n, 9 - n * 10 // 20] = 1.0
    eye[0, 20:, 11] = anti[0, 20:, 11] = 1.0  # padded steps and tokens are ignored
    diagonal = train_acoustic.guided_attention_loss(eye, steps, tokens, 0.2)
    assert diagonal < 0.05 < 0.5 < train_acoustic.guided_attention_loss(anti, steps, tokens, 0.2)


def test_mel_loss_ignores_padding() -> None:
    target = torch.randn(2, 9, 80)
    prediction = target.clone()
    prediction[0, 6:] += 100.0  # beyond the first utterance's length
    mask = train_acoustic.length_mask(torch.tensor([6, 9]), 9)
    assert train_acoustic.masked_mel_loss(prediction, target, mask) == 0.0
    prediction[1, 8] += 1.0
    assert train_acoustic.masked_mel_loss(prediction, target, mask) > 0.0


def test_style_of_padded_references_equals_unpadded() -> None:
    torch.manual_seed(0)
    encoder = StyleEncoder(TINY.style, TINY.n_mels).eval()
    stride = 2 ** len(TINY.style.conv_channels)
    refs = torch.randn(2, 3 * stride, TINY.n_mels)
    refs[1, stride:] = -11.5  # padding after a one-stride reference
    lengths = torch.tensor([2 * stride, stride])
    with torch.no_grad():
        styles = train_acoustic.encode_references(encoder, refs, lengths, stride)
        alone = [encoder(refs[i : i + 1, : int(n)])[0] for i, n in enumerate(lengths)]
    torch.testing.assert_close(styles, torch.stack(alone))


def test_bucketed_batches_cover_everything_once() -> None:
    lengths = list(np.random.default_rng(0).integers(50, 900, 1000))
    batches = train_acoustic.bucketed_batches(lengths, 64, seed=1, epoch=0)
    assert sorted(i for b in batches for i in b) == list(range(1000))
    spread = np.median([np.ptp([lengths[i] for i in b]) / np.max([lengths[i] for i in b]) for b in batches])
    assert spread < 0.3  # sorted by length, so a batch's lengths are close
    assert batches == train_acoustic.bucketed_batches(lengths, 64, seed=1, epoch=0)
    assert batches != train_acoustic.bucketed_batches(lengths, 64, seed=1, epoch=1)


def test_lr_factor_warms_up_again_after_resuming() -> None:
    assert schedule.lr_factor(0, 0, 100, 1000.0) == pytest.approx(0.01)
    assert schedule.lr_factor(99, 0, 100, 1e9) == pytest.approx(1.0)
    assert schedule.lr_factor(1000, 0, 100, 1000.0) == pytest.approx(0.5)
    assert schedule.lr_factor(1000, 1000, 100, 1000.0) == pytest.approx(0.005)
    assert schedule.lr_factor(10**6, 0, 100, 1000.0) == pytest.approx(0.05)
