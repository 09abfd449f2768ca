"""Train the vocoder's generator on ground-truth mels of a rendered corpus.

    python -m tts_triton.training.train_vocoder --data DIR --out DIR [--init CKPT] [--minutes M] [--steps N]

The generator is the checkpoint's (HiFi-GAN, or the STFT-predicting :mod:`tts_triton.models.vocos`); with
``--init`` and ``--vocoder-variant`` naming another variant, a fresh generator of that one starts from step 0
beside the checkpoint's acoustic model, and :mod:`tts_triton.training.merge` joins the two runs afterwards.

Random ``--segment-frames`` segments (mel and the audio it was computed from) of training utterances;
losses of :mod:`tts_triton.training.hifigan_losses` (LSGAN adversarial terms of the multi-period
discriminator with, by ``--discriminators``, HiFi-GAN's multi-scale or UnivNet's multi-resolution one;
feature matching x2, mel L1 x45, multi-resolution STFT x20, and with ``--phase-weight`` APNet's anti-wrapping
phase losses against the recorded audio, which the segments are sample-aligned with). AdamW (0.8, 0.99) at 2e-4,
generator and discriminators each with their own optimizer.

The generator trains on the corpus's mels: ground truth, which keeps the two trainers independent so that
they run side by side, or, to fine-tune it for the acoustic model, teacher-forced predictions of a corpus
made by :mod:`tts_triton.training.gta` (time-aligned with the audio). ``--gan-start`` beyond any step
count trains on the spectral losses alone (``--mel-weight``, ``--stft-weight``).

Schedule: the first ``--gan-start`` steps train the generator on the spectral losses alone (cheap steps that get the
spectral envelope right quickly); then the discriminators train alone for ``--d-warmup`` steps, the generator
waiting, and from then on both train, the generator with its adversarial and feature-matching terms, at ``--lr``
(decaying with ``--half-life`` from here on). So a generator trained adversarially before meets fresh discriminators
once they say something useful, unchanged, not after steps on the spectral losses alone or against untrained ones.
Discriminators are not kept in checkpoints (41-70 M parameters; see :mod:`tts_triton.training.runs`), so a run from
``--init`` starts them afresh and warms them up the same way; ``--resume`` keeps them (``state.pt``).

Forward passes run under bf16 autocast on CUDA (``--amp off`` for fp32); the mel loss is computed in
fp32. The generator's step backpropagates through frozen discriminators (no weight gradients, no graph
for the real branch). ``--cuda-graphs`` replays the step's two phases (the discriminators' pass, then the
generator's, each forward and backward) as CUDA graphs (:mod:`tts_triton.training.step_graphs`); the
discriminators' pass recomputes the generator's output without a graph, one cheap forward more per step.

Data-parallel on several GPUs when launched by ``torch.distributed.run`` (``--nproc-per-node N``): each
rank trains on its own shard of the utterances with ``--batch-size`` segments per step (so the global
batch is N times that), gradients are averaged (DDP), and rank 0 alone validates, logs and writes; the
ranks agree every step on stopping and on skipping a non-finite step.

With ``--ema DECAY`` checkpoints (and validation) hold an exponential moving average of the generator's weights,
which smooths the steps' oscillation against the discriminators; ``state.pt`` keeps the trained weights.

Every ``--val-every`` steps: the mel L1 of whole validation utterances vocoded from the corpus's mels,
against the mels of their recorded audio; a PNG (input vs re-analysed mel), a WAV sample and a checkpoint.

Output directory: ``checkpoint.pt`` (whole checkpoint, fp32), ``losses.jsonl``, ``losses.png``,
``plots/step-NNNNNN.png``, ``latest.png`` and ``sample.wav``.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from tts_triton.core import audio
from tts_triton.data.dataset import VocoderDataset
from tts_triton.models.checkpoint import Checkpoint
from tts_triton.models.generators import build_generator
from tts_triton.training.devices import autocast, join_ranks
from tts_triton.training.hifigan_losses import (
    DISCRIMINATORS,
    MEL_WEIGHT,
    STFT_WEIGHT,
    discriminator_step_loss,
    generator_step_losses,
)
from tts_triton.training.logs import plot_panels
from tts_triton.training.loop import TrainingRun, run_parser
from tts_triton.training.profiling import SKIP_STEPS
from tts_triton.training.runs import both_trained
from tts_triton.training.schedule import lr_factor
from tts_triton.training.step_graphs import CapturedPhase

MODULE = "tts_triton.training.train_vocoder"
#: The least fraction of ``--lr`` that ``--half-life`` decays to: an annealed GAN still needs its steps to move.
LR_FLOOR = 0.1


def segment_stream(dataset: VocoderDataset, batch_size: int, seed: int, first_epoch: int,
                   workers: int) -> Iterator[tuple[int, tuple[Tensor, Tensor]]]:
    """``(epoch, (mel [B, frames, n_mels], audio [B, samples]))`` forever, shuffled per epoch."""
    epoch = first_epoch
    while True:
        dataset.set_epoch(epoch)
        loader = torch.utils.data.DataLoader(dataset, batch_size, shuffle=True, drop_last=True, num_workers=workers,
                                             generator=torch.Generator().manual_seed(seed * 100003 + epoch),
                                             pin_memory=torch.cuda.is_available(), persistent_workers=False)
        for batch in loader:
            yield epoch, batch
        epoch += 1


@contextlib.contextmanager
def frozen(*modules: nn.Module) -> Iterator[None]:
    """Parameters of ``modules`` need no gradient inside the block (a backward pass only reaches inputs)."""
    params = [p for m in modules for p in m.parameters()]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in params:
            p.requires_grad_(True)


@torch.no_grad()
def validate(generator: nn.Module, dataset: VocoderDataset, device: torch.device, plot: Path | None,
             wav: Path | None, step: int) -> dict[str, float]:
    """Mel L1 between the mel of each validation utterance's recorded audio and the mel of the audio vocoded
    from the corpus's mel (fp32, eval mode).

    On a ground-truth corpus the two input mels agree (up to storage rounding); on a teacher-forced one
    (:mod:`tts_triton.training.gta`) the recorded audio is what the fine-tune aims at, not the prediction.
    """
    generator.eval()
    errors = []
    first: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    for index in range(len(dataset)):
        mel, recorded = dataset[index]
        fake = generator(mel.T[None].to(device)).float()[0, 0]
        remel = audio.mel_spectrogram_torch(fake[None])[0]
        truth = audio.mel_spectrogram_torch(recorded[None].to(device))[0]
        frames = min(len(remel), len(truth))
        errors.append(float((remel[:frames] - truth[:frames]).abs().mean()))
        if first is None:
            first = (mel.numpy(), remel.cpu().numpy(), fake.cpu().numpy())
    generator.train()
    assert first is not None
    if plot is not None:
        plot_panels(plot, [("input mel", first[0]), ("mel of the vocoded audio", first[1])],
                    title=f"vocoder step {step}: {dataset.entries[0].id}")
    if wav is not None:
        wav.parent.mkdir(parents=True, exist_ok=True)
        audio.save_wav(wav, first[2].reshape(-1), audio.SAMPLE_RATE)
    return {"mel_l1": float(np.mean(errors))}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = run_parser(MODULE, __doc__.split("\n")[0], resumed="optimizers and discriminators", amp="bf16",
                   val_every=1000, val_utterances=8)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--segment-frames", type=int, default=32, help="mel frames per segment (x256 samples)")
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--mel-weight", type=float, default=MEL_WEIGHT, help="weight of the mel L1 term")
    p.add_argument("--phase-weight", type=float, default=0.0,
                   help="weight of the anti-wrapping phase losses (hifigan_losses.phase_loss; 0: off)")
    p.add_argument("--stft-weight", type=float, default=STFT_WEIGHT,
                   help="weight of the multi-resolution STFT term (0: off)")
    p.add_argument("--warmup", type=int, default=100, help="warmup steps of fresh optimizers (also after resuming)")
    p.add_argument("--half-life", type=float, default=math.inf, metavar="STEPS",
                   help="both learning rates halve every STEPS steps from the end of the discriminators' warm-up "
                        f"(kept when resuming), down to {LR_FLOOR:g} of --lr (default: constant)")
    p.add_argument("--gan-start", type=int, default=1000, help="global step at which the discriminators start")
    p.add_argument("--d-warmup", type=int, default=200,
                   help="discriminator-only steps (the generator waits) before both train")
    p.add_argument("--discriminators", choices=tuple(DISCRIMINATORS), default="mpd+msd",
                   help="multi-period with multi-scale (HiFi-GAN's) or multi-resolution (UnivNet's, Vocos's: "
                        "cheaper to run)")
    p.add_argument("--ema", type=float, default=0.0, metavar="DECAY",
                   help="checkpoints hold an exponential moving average of the generator's weights with this decay "
                        "per step (e.g. 0.999; 0: the weights themselves)")
    p.add_argument("--cuda-graphs", action="store_true",
                   help="replay each step's discriminator and generator passes as CUDA graphs once the schedule "
                        "has both on (one CUDA device): the host no longer bounds the step")
    p.add_argument("--narrow-discriminators", type=int, default=1, choices=(1, 2, 4, 8, 16), metavar="N",
                   help="divide the discriminators' channel counts by N (1: HiFi-GAN's; more: quick checks on a CPU)")
    return p.parse_args(argv)


class VocoderRun(TrainingRun):
    """The vocoder trainer's hooks on :class:`~tts_triton.training.loop.TrainingRun`: the generator, the
    discriminators and their optimizers, data-parallel over ranks."""

    part, module, log_every = "vocoder", MODULE, 100
    loss_keys = ("mel", "stft", "phase", "adv", "fm", "disc", "mel_l1")

    def __init__(self, args: argparse.Namespace, argv: Sequence[str]) -> None:
        ranks = join_ranks()
        super().__init__(args, argv, ranks, fixed_shapes=True)
        # Discriminators are fresh in every run but a resumed one.
        self.d_start = int(self.state["d_start"]) if self.state is not None else max(args.gan_start, self.first_step)
        train = VocoderDataset(args.data, "train", args.segment_frames, seed=args.seed)
        self.val = VocoderDataset(train.corpus, "val", None, seed=args.seed)
        self.val.entries = self.val.entries[: args.val_utterances]
        train.entries = train.entries[ranks.rank :: ranks.world]
        self.corpus_summary = train.corpus.summary
        if ranks.main:
            variant = self.ckpt.config.vocoder.variant
            print(f"[vocoder] {len(train) * ranks.world} train utterances, generator {variant}, "
                  f"device {self.device} x {ranks.world} ranks, batch {args.batch_size} x {args.segment_frames} "
                  f"frames per rank, start step {self.first_step}, discriminators from step {self.d_start}", flush=True)
        self.generator = self.ckpt.generator.to(self.device).train()
        # With --ema the checkpoint holds the generator's moving average and state.pt the trained weights, which a
        # resumed run continues from; a run from --init starts both from the file.
        self.ema: nn.Module | None = None
        if args.ema:
            with torch.random.fork_rng(devices=[]):  # its random initialisation is overwritten: keep the seed's stream
                self.ema = build_generator(self.ckpt.config.vocoder)
            self.ema.load_state_dict(self.generator.state_dict())
            self.ema.to(self.device).requires_grad_(False)
        if self.state is not None and "generator" in self.state:
            self.generator.load_state_dict(self.state["generator"])
        self.discriminators = [make(narrow=args.narrow_discriminators).to(self.device).train()
                               for make in DISCRIMINATORS[args.discriminators]]
        fused = self.device.type == "cuda"  # one kernel per step instead of several per parameter
        self.opt_g = torch.optim.AdamW(self.generator.parameters(), lr=args.lr, betas=(0.8, 0.99), fused=fused)
        self.opt_d = torch.optim.AdamW([p for d in self.discriminators for p in d.parameters()], lr=args.lr,
                                       betas=(0.8, 0.99), fused=fused)
        if self.state is not None:
            if self.state["discriminators"] != args.discriminators:
                raise SystemExit(f"--discriminators {args.discriminators}: the run resumed trained "
                                 f"{self.state['discriminators']}")
            for d, state in zip(self.discriminators, self.state["d_states"], strict=True):
                d.load_state_dict(state)
            self.opt_g.load_state_dict(self.state["opt_g"])
            self.opt_d.load_state_dict(self.state["opt_d"])
        self.amp = autocast(args.amp, self.device)
        # The optimizers hold the modules' own parameters; the DDP wrappers only average their gradients.
        self.g_step, self.d_steps = self.generator, self.discriminators
        if ranks.world > 1:
            ids = [self.device] if self.device.type == "cuda" else None
            self.g_step, *self.d_steps = (DistributedDataParallel(m, device_ids=ids)
                                          for m in (self.generator, *self.discriminators))
        if args.cuda_graphs and (self.device.type != "cuda" or ranks.world > 1):
            raise SystemExit("--cuda-graphs needs one CUDA device (no data-parallel ranks)")
        self.d_graph: CapturedPhase | None = None
        self.g_graph: CapturedPhase | None = None
        self.mel = self.real = torch.empty(0)
        self.g_trains = True
        self.segments = segment_stream(train, args.batch_size, args.seed * ranks.world + ranks.rank, self.epoch,
                                       args.workers)

    def set_lr(self, optimizer: torch.optim.Optimizer, start: int) -> None:
        """``--lr`` times the warm-up from ``start`` and the ``--half-life`` decay from the adversarial phase."""
        factor = lr_factor(self.step, start, self.args.warmup, self.args.half_life, LR_FLOOR,
                           decay_from=self.d_start + self.args.d_warmup)
        for group in optimizer.param_groups:
            group["lr"] = self.args.lr * factor

    def load_batch(self) -> None:
        """The next batch into :attr:`mel` and :attr:`real` (refilled in place once a phase is captured)."""
        self.epoch, (mel, wav) = next(self.segments)
        mel = mel.to(self.device, non_blocking=True).transpose(1, 2)
        real = wav.to(self.device, non_blocking=True)[:, None]
        if self.d_graph is None and self.g_graph is None:
            self.mel, self.real = mel, real
        else:
            self.mel.copy_(mel)
            self.real.copy_(real)

    def d_phase(self) -> Tensor:
        """The discriminators' loss on this batch (detached) and its gradients (the generator's output taken as
        given)."""
        with torch.no_grad(), self.amp:
            fake = self.g_step(self.mel)
        loss = discriminator_step_loss(self.real, fake, self.d_steps, self.amp)
        loss.backward()
        return loss.detach()  # the step's autograd graph dies here (a CUDA graph capture needs that)

    def g_phase(self, adversarial: bool) -> dict[str, Tensor]:
        """The generator's loss terms on this batch (detached) and its gradients, the discriminators frozen."""
        with self.amp:
            fake = self.g_step(self.mel)
        with frozen(*self.discriminators):
            terms = generator_step_losses(self.real, fake, self.discriminators, adversarial, self.amp,
                                          self.args.mel_weight, self.args.stft_weight, self.args.phase_weight)
            terms["total"].backward()
        return {k: v.detach() for k, v in terms.items()}

    @property
    def g_start(self) -> int:
        """The step from which the generator's optimizer steps in this optimizer's life: the discriminator-only
        warm-up holds it back unless it was already training when the discriminators joined."""
        return self.optimizer_start if self.optimizer_start < self.d_start else self.d_start + self.args.d_warmup

    def forward_backward(self) -> tuple[dict[str, Tensor], Tensor]:
        """A discriminator step (from ``d_start`` on), then, unless the discriminators are warming up alone, the
        generator's losses and gradients; the generator's step is taken when its total loss is finite on every
        rank. With ``--cuda-graphs`` each phase is captured the first time it runs in its steady form."""
        self.load_batch()
        d_on = self.step >= self.d_start
        self.g_trains = not d_on or self.step >= self.d_start + self.args.d_warmup
        graphs = self.args.cuda_graphs
        terms: dict[str, Tensor] = {}
        if d_on:
            if graphs and self.d_graph is None:
                print(f"[vocoder] step {self.step}: capturing the discriminators' phase as a CUDA graph", flush=True)
                self.d_graph = CapturedPhase(self.d_phase, (p for d in self.discriminators for p in d.parameters()))
            self.set_lr(self.opt_d, self.d_start)
            if self.d_graph is None:
                self.opt_d.zero_grad(set_to_none=True)
            terms["disc"] = self.d_phase() if self.d_graph is None else self.d_graph.replay()
            self.opt_d.step()
        if not self.g_trains:
            return terms, terms["disc"]
        if graphs and d_on and self.g_graph is None:
            print(f"[vocoder] step {self.step}: capturing the generator's phase as a CUDA graph", flush=True)
            self.g_graph = CapturedPhase(lambda: self.g_phase(True), self.generator.parameters(),
                                         pool=self.d_graph.pool if self.d_graph is not None else None)
        self.set_lr(self.opt_g, self.g_start)
        if self.g_graph is None:
            self.opt_g.zero_grad(set_to_none=True)
        terms.update(self.g_phase(d_on) if self.g_graph is None else self.g_graph.replay())
        return terms, terms["total"]

    def steps_before_profile(self) -> int:
        # recorded steps train the generator against the discriminators, as most steps of a run do
        return max(self.d_start + self.args.d_warmup - self.step, 0) + SKIP_STEPS

    def optimizer_step(self) -> None:
        if not self.g_trains:
            return
        self.opt_g.step()
        if self.ema is not None:
            with torch.no_grad():
                for average, weight in zip(self.ema.parameters(), self.generator.parameters(), strict=True):
                    average.lerp_(weight, 1 - self.args.ema)

    @property
    def shipped_generator(self) -> nn.Module:
        """What checkpoints hold and validation measures: the moving average with ``--ema``, else the generator."""
        return self.generator if self.ema is None else self.ema

    def validate(self, plot: Path) -> dict[str, float]:
        return validate(self.shipped_generator, self.val, self.device, plot, self.out / "sample.wav", self.step)

    def record(self) -> dict[str, Any]:
        a = self.args
        return {"variant": self.ckpt.config.vocoder.variant, "batch_size": a.batch_size * self.ranks.world,
                "segment_frames": a.segment_frames, "lr": a.lr, "gan_start": a.gan_start, "mel_weight": a.mel_weight,
                "stft_weight": a.stft_weight, "phase_weight": a.phase_weight, "discriminators": a.discriminators,
                "amp": a.amp, "cuda_graphs": a.cuda_graphs, "ema": a.ema, "half_life": a.half_life,
                "training_mels": "teacher-forced" if "gta" in self.corpus_summary else "ground truth"}

    def checkpoint(self, info: dict[str, Any]) -> Checkpoint:
        return Checkpoint(self.ckpt.config, self.ckpt.acoustic, self.shipped_generator, both_trained(info), info)

    def training_state(self) -> dict[str, Any]:
        return {"discriminators": self.args.discriminators, "d_states": [d.state_dict() for d in self.discriminators],
                "opt_g": self.opt_g.state_dict(), "opt_d": self.opt_d.state_dict(), "d_start": self.d_start,
                **({"generator": self.generator.state_dict()} if self.ema is not None else {})}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    run = VocoderRun(parse_args(argv), argv)
    status = run.run()
    if run.ranks.world > 1:
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main())
