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
import math
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from tts_triton.checkpoint import Checkpoint
from tts_triton.config import DecoderConfig, VocoderConfig
from tts_triton.data.dataset import AcousticDataset, collate_acoustic
from tts_triton.models.acoustic import AcousticModel, AcousticOutput
from tts_triton.models.style_encoder import StyleEncoder
from tts_triton.training.common import (
    CHECKPOINT_FILE,
    Budget,
    JsonlLog,
    Mean,
    Progress,
    autocast,
    both_trained,
    corpus_info,
    fresh_config,
    lr_factor,
    part_info,
    pick_device,
    plot_losses,
    plot_panels,
    run_record,
    save_state,
    start_run,
)

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
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, required=True, help="corpus directory (tts_triton.data.corpus build)")
    p.add_argument("--out", type=Path, required=True, help="run directory (created)")
    p.add_argument("--init", type=Path, help="checkpoint to start from (weights, config, step count)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out (checkpoint and optimizer state) when it has one; else --init")
    p.add_argument("--minutes", type=float, help="wall-clock budget; saves and exits when it runs out")
    p.add_argument("--steps", type=int, help="stop at this global step")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=200, help="warmup steps (also after resuming)")
    p.add_argument("--half-life", type=float, default=6000.0, help="steps per halving of the learning rate")
    p.add_argument("--weight-decay", type=float, default=1e-6)
    p.add_argument("--clip", type=float, default=1.0, help="gradient norm clip")
    p.add_argument("--guided-weight", type=float, default=LossWeights.guided)
    p.add_argument("--guided-g", type=float, default=LossWeights.guided_g)
    p.add_argument("--gate-pos-weight", type=float, default=LossWeights.gate_pos_weight)
    p.add_argument("--frames-per-step", type=int, default=DecoderConfig.frames_per_step,
                   help="decoder r for a fresh model (ignored with --init)")
    p.add_argument("--vocoder-variant", default=VocoderConfig.variant, help="HiFi-GAN variant of a fresh model")
    p.add_argument("--amp", choices=("off", "bf16"), default="off", help="autocast on CUDA (see the docstring)")
    p.add_argument("--val-every", type=int, default=250)
    p.add_argument("--val-utterances", type=int, default=256)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--device")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    budget = Budget(args.minutes)
    device = pick_device(args.device)
    torch.manual_seed(args.seed)
    ckpt, state = start_run(args.out, args.resume, args.init,
                            fresh_config(args.frames_per_step, args.vocoder_variant), args.seed)
    cfg = ckpt.config
    r = cfg.decoder.frames_per_step
    record = part_info(ckpt, "acoustic")
    first_step, epoch = int(record.get("steps", 0)), int(record.get("epochs", 0))
    weights = LossWeights(gate_pos_weight=args.gate_pos_weight, guided=args.guided_weight, guided_g=args.guided_g)

    train = AcousticDataset(args.data, "train", seed=args.seed)
    val = AcousticDataset(train.corpus, "val", seed=args.seed)
    val_batches = list(epoch_loader(val, args.batch_size, r, args.seed, 0, 0, args.val_utterances))
    n_val = min(len(val), args.val_utterances)
    print(f"[acoustic] {len(train)} train / {n_val} val utterances, {train.corpus.summary['hours']:.2f} h; "
          f"device {device}, r={r}, batch {args.batch_size}, start step {first_step}", flush=True)

    if args.init is None and state is None:
        init_frame_bias(ckpt.acoustic, train)
    model = ckpt.acoustic.to(device).train()
    params = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-6,
                                  weight_decay=args.weight_decay)
    optimizer_start = first_step
    if state is not None:
        optimizer.load_state_dict(state["optimizer"])
        optimizer_start = int(state["optimizer_start"])
    amp = autocast(args.amp, device)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    log = JsonlLog(out / "losses.jsonl")
    progress = Progress("acoustic", budget, first_step, args.steps)
    mean = Mean()
    step, skipped = first_step, 0
    history = list(record.get("history", []))

    def checkpoint(val_losses: dict[str, float]) -> None:
        history.append({"step": step, **{k: round(v, 5) for k, v in val_losses.items()}})
        runs = [*record.get("runs", []), run_record(MODULE, argv, first_step, step, budget.elapsed / 60, device)]
        info = {**ckpt.info, "data": corpus_info(train.corpus.summary),
                "acoustic": {"steps": step, "epochs": epoch, "parameters": params, "batch_size": args.batch_size,
                             "loss_weights": dataclasses.asdict(weights), "lr": args.lr, "amp": args.amp,
                             "last_val": history[-1], "history": history, "runs": runs}}
        Checkpoint(cfg, model, ckpt.generator, both_trained(info), info).save(out / CHECKPOINT_FILE)
        save_state(out, {"optimizer": optimizer.state_dict(), "optimizer_start": optimizer_start})
        plot_losses(out / "losses.png", log.rows(), ("total", "mel", "post", "gate", "guided"), "acoustic losses")

    def run_validation() -> dict[str, float]:
        plot = out / "plots" / f"step-{step:06d}.png"
        result = validate(model, val_batches, device, r, weights, amp, plot, step)
        (out / "latest.png").write_bytes(plot.read_bytes())
        log.write({"kind": "val", "step": step, "epoch": epoch, "minutes": round(budget.elapsed / 60, 2), **result})
        print(f"[acoustic] val step {step}: " + " ".join(f"{k} {v:.4g}" for k, v in result.items()), flush=True)
        return result

    stream = batch_stream(train, args.batch_size, r, args.seed, epoch, args.workers)
    while not budget.expired() and (args.steps is None or step < args.steps):
        epoch, batch = next(stream)
        batch = to_device(batch, device)
        for group in optimizer.param_groups:
            group["lr"] = args.lr * lr_factor(step, optimizer_start, args.warmup, args.half_life)
        with amp:
            out_ = teacher_forced(model, batch)
        terms = losses(out_, batch, r, weights)
        optimizer.zero_grad(set_to_none=True)
        terms["total"].backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        if math.isfinite(float(norm)):
            optimizer.step()
            step += 1
        else:
            skipped += 1
            if skipped > 20:
                raise RuntimeError(f"{skipped} steps with non-finite gradients; stopping")
            continue
        mean.add({**terms, "grad_norm": norm})
        if step % 25 == 0:
            row = mean.read()
            log.write({"kind": "train", "step": step, "epoch": epoch, "lr": optimizer.param_groups[0]["lr"],
                       "minutes": round(budget.elapsed / 60, 2), **row})
            progress.update(step, row)
        if step % args.val_every == 0:
            checkpoint(run_validation())
    checkpoint(run_validation())
    progress.update(step, {"skipped": skipped}, force=True)
    print(f"[acoustic] done at step {step} after {budget.elapsed / 60:.1f} min -> {out / CHECKPOINT_FILE}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
