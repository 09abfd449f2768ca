"""Train the acoustic model (text encoder, GST style encoder, Tacotron2 decoder + postnet) on a rendered corpus.

    python -m tts_triton.training.train_acoustic --data DIR --out DIR [--init CKPT] [--minutes M] [--steps N]

Objective per batch (teacher forcing):

* mel: L1 + L2 on the decoder output and on the postnet output, over each utterance's frames only;
* stop gate: BCE with ``pos_weight`` on the per-step logits; the target is 1 from the step holding an
  utterance's last frame on (padded steps included, so that decoding past the end keeps saying stop);
* guided attention (Tachibana et al., 2017): alignment mass far from the diagonal is penalised with
  ``1 - exp(-(n/N - t/T)^2 / (2 g^2))``, averaged per valid decoder step.

The style comes from a *different* utterance of the same voice and emotion (the dataset draws it), so
the style tokens learn voice and emotion rather than content. Each reference is cut to a whole number
of the reference encoder's time strides (2 ** conv layers = 64 frames) at a random offset, and
references of equal length are encoded together, so that no reference is padded: the GRU's final
state never reads padding, as at inference.

Batches are bucketed by length (sorted with jitter, then shuffled), AdamW with warmup and exponential
decay, gradient clipping. On CUDA, matmuls run in TF32 and the recurrent state stays fp32: the decoder
loop is launch-bound, so bf16 autocast (``--amp bf16``) would only add cast kernels and round the LSTM
cell state. Every ``--val-every`` steps: validation losses, a free-running decode of a few validation
sentences (stop step, attention focus), a PNG of alignments and mels, a checkpoint. Training ends
after ``--steps`` or when ``--minutes`` run out, with a final validation and checkpoint.

Output directory: ``checkpoint.pt`` (whole checkpoint, fp32), ``losses.jsonl``, ``losses.png``,
``plots/step-NNNNNN.png`` and ``latest.png``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from tts_triton.data.dataset import AcousticDataset, collate_acoustic
from tts_triton.models.acoustic import AcousticModel, AcousticOutput
from tts_triton.models.checkpoint import Checkpoint
from tts_triton.models.style_encoder import StyleEncoder
from tts_triton.training.devices import autocast
from tts_triton.training.logs import Mean, plot_panels
from tts_triton.training.loop import TrainingRun, run_parser
from tts_triton.training.runs import both_trained
from tts_triton.training.schedule import lr_factor

MODULE = "tts_triton.training.train_acoustic"


@dataclasses.dataclass(frozen=True)
class LossWeights:
    gate: float = 1.0
    gate_pos_weight: float = 5.0
    guided: float = 2.0
    guided_g: float = 0.2


# --- batching ---------------------------------------------------------------------------------------


def bucketed_batches(lengths: Sequence[int], batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    """Indices grouped into batches of similar length, in a random order that depends on ``(seed, epoch)``.

    Lengths get +-10 % multiplicative jitter before sorting, so batches differ between epochs. The last
    batch may be smaller.
    """
    rng = np.random.default_rng([seed, epoch])
    keys = np.asarray(lengths, dtype=np.float64) * rng.uniform(0.9, 1.1, len(lengths))
    order = np.argsort(keys, kind="stable")
    batches = [order[i : i + batch_size].tolist() for i in range(0, len(order), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def epoch_loader(dataset: AcousticDataset, batch_size: int, r: int, seed: int, epoch: int, workers: int,
                 limit: int | None = None) -> torch.utils.data.DataLoader:
    """A DataLoader over one epoch's bucketed batches of the first ``limit`` items (all by default), frames
    padded to a multiple of ``r``. References still come from the whole dataset."""
    dataset.set_epoch(epoch)
    batches = bucketed_batches([e.n_frames for e in dataset.entries[:limit]], batch_size, seed, epoch)
    return torch.utils.data.DataLoader(dataset, batch_sampler=batches, num_workers=workers,
                                       collate_fn=functools.partial(collate_acoustic, frames_multiple=r),
                                       pin_memory=torch.cuda.is_available(), persistent_workers=False)


def batch_stream(dataset: AcousticDataset, batch_size: int, r: int, seed: int, first_epoch: int,
                 workers: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(epoch, batch)`` forever, starting at ``first_epoch``."""
    epoch = first_epoch
    while True:
        for batch in epoch_loader(dataset, batch_size, r, seed, epoch, workers):
            yield epoch, batch
        epoch += 1


# --- model pieces -----------------------------------------------------------------------------------


def length_mask(lengths: Tensor, size: int) -> Tensor:
    """``[B, size]`` float mask, 1 where the position is below the row's length."""
    return (torch.arange(size, device=lengths.device)[None, :] < lengths[:, None]).float()


def encode_references(encoder: StyleEncoder, ref_mel: Tensor, ref_lengths: Tensor, stride: int) -> Tensor:
    """Style vectors ``[B, dim]`` of padded references ``[B, frames, n_mels]``, no reference ever padded.

    Each reference is cut to a multiple of ``stride`` frames (the reference encoder's time downsampling;
    a reference shorter than one stride is used whole) at a random offset; references of equal cut
    length go through the encoder together.
    """
    lengths = ref_lengths.tolist()
    cut = [max(n // stride * stride, min(n, stride)) for n in lengths]
    offsets = [int(torch.randint(n - c + 1, (1,))) for n, c in zip(lengths, cut, strict=True)]
    styles: list[Tensor | None] = [None] * len(lengths)
    for size in sorted(set(cut)):
        rows = [i for i, c in enumerate(cut) if c == size]
        clips = torch.stack([ref_mel[i, offsets[i] : offsets[i] + size] for i in rows])
        for i, style in zip(rows, encoder(clips), strict=True):
            styles[i] = style
    return torch.stack(styles)  # type: ignore[arg-type]


def init_frame_bias(model: AcousticModel, dataset: AcousticDataset, utterances: int = 256) -> None:
    """Start the decoder's frame projection at the corpus mean log-mel per bin (for a fresh model): the
    first steps then fit the spectral shape instead of climbing from 0 to the silence level."""
    mels = np.concatenate([dataset.corpus.mel(e) for e in dataset.entries[:utterances]]).astype(np.float32)
    with torch.no_grad():
        model.decoder.projection.bias.copy_(torch.from_numpy(mels.mean(axis=0)).repeat(model.decoder.r))


def teacher_forced(model: AcousticModel, batch: dict[str, Tensor]) -> AcousticOutput:
    """``AcousticModel.forward`` on a collated batch, with the style taken from :func:`encode_references`."""
    mask = length_mask(batch["id_lengths"], batch["ids"].shape[1])
    memory = model.text_encoder(batch["ids"], mask)
    stride = 2 ** len(model.cfg.style.conv_channels)
    style = encode_references(model.style_encoder, batch["ref_mel"], batch["ref_lengths"], stride)
    mel, gate, alignment = model.decoder(memory, mask, style, batch["mel"])
    return AcousticOutput(mel, model.decoder.postnet(mel), gate, alignment, style)


def guided_attention_loss(alignment: Tensor, step_lengths: Tensor, token_lengths: Tensor, g: float) -> Tensor:
    """Mean over valid decoder steps of ``sum_t A[n, t] * (1 - exp(-(n/N - t/T)^2 / (2 g^2)))``.

    ``alignment [B, steps, tokens]``; ``N``, ``T`` are each utterance's step and token counts.
    """
    _, steps, tokens = alignment.shape
    n = torch.arange(steps, device=alignment.device)[None, :, None] / step_lengths[:, None, None]
    t = torch.arange(tokens, device=alignment.device)[None, None, :] / token_lengths[:, None, None]
    penalty = 1.0 - torch.exp(-((n - t) ** 2) / (2.0 * g * g))
    step_mask = length_mask(step_lengths, steps)
    weighted = alignment.float() * penalty * step_mask[:, :, None] * length_mask(token_lengths, tokens)[:, None, :]
    return weighted.sum() / step_mask.sum()


def masked_mel_loss(prediction: Tensor, target: Tensor, frame_mask: Tensor) -> Tensor:
    """L1 + L2 over valid frames (``frame_mask [B, F]``), averaged per mel value."""
    mask = frame_mask[:, :, None]
    diff = (prediction.float() - target) * mask
    count = mask.sum() * target.shape[2]
    return (diff.abs().sum() + diff.pow(2).sum()) / count


def losses(out: AcousticOutput, batch: dict[str, Tensor], r: int, w: LossWeights) -> dict[str, Tensor]:
    """The loss terms and their weighted ``total``; see the module docstring."""
    frame_mask = length_mask(batch["mel_lengths"], batch["mel"].shape[1])
    mel = masked_mel_loss(out.mel, batch["mel"], frame_mask)
    post = masked_mel_loss(out.mel_post, batch["mel"], frame_mask)
    stop = batch["stop"][:, r - 1 :: r]  # a step's target is that of its last frame
    gate = F.binary_cross_entropy_with_logits(out.gate.float(), stop,
                                              pos_weight=torch.tensor(w.gate_pos_weight, device=stop.device))
    step_lengths = torch.div(batch["mel_lengths"] + r - 1, r, rounding_mode="floor")
    guided = guided_attention_loss(out.alignment, step_lengths, batch["id_lengths"], w.guided_g)
    total = mel + post + w.gate * gate + w.guided * guided
    return {"total": total, "mel": mel, "post": post, "gate": gate, "guided": guided}


def attention_focus(alignment: Tensor, steps: Tensor) -> Tensor:
    """Mean over valid steps of the largest attention weight: ~1 for a sharp alignment, 1/T for a flat one."""
    mask = length_mask(steps, alignment.shape[1])
    return (alignment.max(dim=2).values * mask).sum() / mask.sum()


@torch.no_grad()
def free_run(model: AcousticModel, ids: Tensor, id_lengths: Tensor, style: Tensor) -> dict[str, Any]:
    """Greedy decoding with the serving stop rule (stop after the first step with a logit > 0, else the
    max-steps guard), ``steps_per_call`` steps at a time.

    Returns per row: ``mel`` (postnet, ``[frames, n_mels]`` numpy), ``alignment`` (``[steps, tokens]``),
    ``steps``, ``hit_max`` (bool).
    """
    d = model.cfg.decoder
    mask = length_mask(id_lengths, ids.shape[1])
    memory = model.text_encoder(ids, mask)
    processed = model.decoder.process_memory(memory)
    state = model.decoder.initial_state(memory)
    limit = [d.max_steps(int(n)) for n in id_lengths]
    stops: list[int | None] = [None] * len(limit)
    mels, aligns = [], []
    done = 0
    while not all(s is not None or done >= m for s, m in zip(stops, limit, strict=True)):
        mel, gate, alignment, state = model.decoder.run(state, d.steps_per_call, memory, processed, mask, style)
        mels.append(mel)
        aligns.append(alignment)
        for row in range(len(limit)):
            if stops[row] is None:
                hits = torch.nonzero(gate[row] > 0).flatten()
                if len(hits):
                    stops[row] = done + int(hits[0]) + 1
        done += d.steps_per_call
    mel_all = model.decoder.postnet(torch.cat(mels, dim=1))
    align_all = torch.cat(aligns, dim=1)
    out = []
    for row, (stop, cap) in enumerate(zip(stops, limit, strict=True)):
        steps = min(stop if stop is not None else cap, cap)
        out.append({"mel": mel_all[row, : steps * d.frames_per_step].float().cpu().numpy(),
                    "alignment": align_all[row, :steps, : int(id_lengths[row])].float().cpu().numpy(),
                    "steps": steps, "hit_max": stop is None or stop > cap})
    return out


# --- training ---------------------------------------------------------------------------------------


def to_device(batch: dict[str, Any], device: torch.device) -> dict[str, Any]:
    return {k: v.to(device, non_blocking=True) if isinstance(v, Tensor) else v for k, v in batch.items()}


def validate(model: AcousticModel, batches: list[dict[str, Any]], device: torch.device, r: int, w: LossWeights,
             amp: contextlib.AbstractContextManager, plot: Path | None, step: int) -> dict[str, float]:
    """Validation losses over ``batches`` (teacher forced), then a free-running decode of the first batch's
    first 4 utterances (length ratio to the target, focus, max-steps hits); draws ``plot`` if given."""
    model.eval()
    mean = Mean()
    with torch.no_grad():
        for batch in batches:
            batch = to_device(batch, device)
            with amp:
                out = teacher_forced(model, batch)
            terms = losses(out, batch, r, w)
            steps = torch.div(batch["mel_lengths"] + r - 1, r, rounding_mode="floor")
            mean.add({**terms, "focus": attention_focus(out.alignment.float(), steps)})
        first = to_device(batches[0], device)
        n = min(4, len(first["id"]))
        with amp:
            tf = teacher_forced(model, {k: v[:n] if isinstance(v, Tensor) else v[:n] for k, v in first.items()})
            runs = free_run(model, first["ids"][:n], first["id_lengths"][:n], tf.style)
    model.train()
    result = mean.read()
    targets = first["mel_lengths"][:n].tolist()
    result["free_len_ratio"] = float(np.mean([len(x["mel"]) / t for x, t in zip(runs, targets, strict=True)]))
    result["free_hit_max"] = float(np.mean([x["hit_max"] for x in runs]))
    result["free_focus"] = float(np.mean([x["alignment"].max(axis=1).mean() for x in runs]))
    if plot is not None:
        length, tokens = targets[0], int(first["id_lengths"][0])
        steps = -(-length // r)
        plot_panels(plot, [
            ("teacher-forced alignment (steps x tokens)", tf.alignment[0, :steps, :tokens].float().cpu().numpy()),
            (f"free-running alignment ({runs[0]['steps']} steps{', HIT MAX' if runs[0]['hit_max'] else ''})",
             runs[0]["alignment"]),
            ("target mel", first["mel"][0, :length].cpu().numpy()),
            ("teacher-forced postnet mel", tf.mel_post[0, :length].float().cpu().numpy()),
            ("free-running postnet mel", runs[0]["mel"]),
        ], title=f"acoustic step {step}: {first['id'][0]}")
    return result


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = run_parser(MODULE, __doc__.split("\n")[0], resumed="optimizer state", amp="off", val_every=250,
                   val_utterances=256)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=200, help="warmup steps (also after resuming)")
    p.add_argument("--half-life", type=float, default=6000.0, help="steps per halving of the learning rate")
    p.add_argument("--weight-decay", type=float, default=1e-6)
    p.add_argument("--clip", type=float, default=1.0, help="gradient norm clip")
    p.add_argument("--guided-weight", type=float, default=LossWeights.guided)
    p.add_argument("--guided-g", type=float, default=LossWeights.guided_g)
    p.add_argument("--gate-pos-weight", type=float, default=LossWeights.gate_pos_weight)
    return p.parse_args(argv)


class AcousticRun(TrainingRun):
    """The acoustic trainer's hooks on :class:`~tts_triton.training.loop.TrainingRun`."""

    part, module, log_every = "acoustic", MODULE, 25
    loss_keys = ("total", "mel", "post", "gate", "guided")

    def __init__(self, args: argparse.Namespace, argv: Sequence[str]) -> None:
        super().__init__(args, argv)
        self.r = self.ckpt.config.decoder.frames_per_step
        self.weights = LossWeights(gate_pos_weight=args.gate_pos_weight, guided=args.guided_weight,
                                   guided_g=args.guided_g)
        train = AcousticDataset(args.data, "train", seed=args.seed)
        val = AcousticDataset(train.corpus, "val", seed=args.seed)
        self.corpus_summary = train.corpus.summary
        self.val_batches = list(epoch_loader(val, args.batch_size, self.r, args.seed, 0, 0, args.val_utterances))
        print(f"[acoustic] {len(train)} train / {min(len(val), args.val_utterances)} val utterances, "
              f"{train.corpus.summary['hours']:.2f} h; device {self.device}, r={self.r}, batch {args.batch_size}, "
              f"start step {self.first_step}", flush=True)
        if args.init is None and self.state is None:
            init_frame_bias(self.ckpt.acoustic, train)
        self.model = self.ckpt.acoustic.to(self.device).train()
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-6,
                                           weight_decay=args.weight_decay)
        if self.state is not None:
            self.optimizer.load_state_dict(self.state["optimizer"])
        self.amp = autocast(args.amp, self.device)
        self.batches = batch_stream(train, args.batch_size, self.r, args.seed, self.epoch, args.workers)

    def forward_backward(self) -> tuple[dict[str, Tensor], Tensor]:
        """Teacher-forced losses of the next batch; the step is taken when the clipped gradient norm is finite."""
        self.epoch, batch = next(self.batches)
        batch = to_device(batch, self.device)
        for group in self.optimizer.param_groups:
            group["lr"] = self.args.lr * lr_factor(self.step, self.optimizer_start, self.args.warmup,
                                                   self.args.half_life)
        with self.amp:
            out = teacher_forced(self.model, batch)
        terms = losses(out, batch, self.r, self.weights)
        self.optimizer.zero_grad(set_to_none=True)
        terms["total"].backward()
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.args.clip)
        return {**terms, "grad_norm": norm}, norm

    def optimizer_step(self) -> None:
        self.optimizer.step()

    def log_columns(self) -> dict[str, Any]:
        return {"lr": self.optimizer.param_groups[0]["lr"]}

    def validate(self, plot: Path) -> dict[str, float]:
        return validate(self.model, self.val_batches, self.device, self.r, self.weights, self.amp, plot, self.step)

    def record(self) -> dict[str, Any]:
        return {"parameters": sum(p.numel() for p in self.model.parameters()), "batch_size": self.args.batch_size,
                "loss_weights": dataclasses.asdict(self.weights), "lr": self.args.lr, "amp": self.args.amp}

    def checkpoint(self, info: dict[str, Any]) -> Checkpoint:
        return Checkpoint(self.ckpt.config, self.model, self.ckpt.generator, both_trained(info), info)

    def training_state(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict()}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    return AcousticRun(parse_args(argv), argv).run()


if __name__ == "__main__":
    sys.exit(main())
