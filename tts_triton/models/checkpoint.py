"""Checkpoints: one file holding the model config, the acoustic model and the vocoder's generator.

File format (``torch.save`` of a dict): ``format`` = :data:`FORMAT`, ``config`` (ModelConfig dict),
``acoustic`` and ``generator`` state dicts (a HiFi-GAN generator in the public layout, with weight norm; or the
generator of :mod:`tts_triton.models.vocos`, as ``config.vocoder.variant`` says), ``trained`` (bool) and
``info`` (free-form metadata: data, steps, metrics).

Until a trained default voice ships in ``tts_triton/assets/``, :func:`load_default` returns a
deterministic seeded initialisation with ``trained=False``; every user-facing path prints
:data:`UNTRAINED_LABEL` when it uses such weights.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tts_triton.core.config import ModelConfig
from tts_triton.core.layout import VOICE_BANK_FILE
from tts_triton.models.acoustic import AcousticModel
from tts_triton.models.generators import build_generator, inference_generator
from tts_triton.models.hifigan import load_generator_state
from tts_triton.models.stages import build_stages

FORMAT = "tts-triton/1"
ASSETS = Path(__file__).parents[1] / "assets"
DEFAULT_CHECKPOINT = ASSETS / "default_voice.pt"
#: The default voice's voice bank, shipped beside it.
DEFAULT_VOICE_BANK = ASSETS / VOICE_BANK_FILE
UNTRAINED_LABEL = "UNTRAINED weights (seeded initialisation): the output is noise, not speech"
DEFAULT_SEED = 1234

log = logging.getLogger(__name__)


@dataclass
class Checkpoint:
    config: ModelConfig
    acoustic: AcousticModel
    generator: nn.Module
    trained: bool
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.info.get("name", "default" if self.trained else "untrained-seeded"))

    @property
    def voices(self) -> list[str]:
        """The corpus voices this checkpoint learned, in ``prosody.CORPUS_VOICES`` order: those its training
        data counted (``info["data"]["voices"]``), or ``prosody.VOICES`` (espeak-ng's) for a checkpoint whose
        data record has no voice counts (trained before the corpus had another teacher, or never trained)."""
        from tts_triton.data.prosody import CORPUS_VOICES, VOICES

        counts = self.info.get("data", {}).get("voices")
        if not isinstance(counts, dict):
            return list(VOICES)
        return [name for name in CORPUS_VOICES if counts.get(name, 0) > 0]

    def with_fresh_generator(self, variant: str, seed: int) -> Checkpoint:
        """This checkpoint's acoustic model beside a seeded untrained generator of ``variant``; the record of
        the vocoder's training is dropped (its steps count from 0 again)."""
        vocoder = dataclasses.replace(self.config.vocoder, variant=variant)
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            generator = build_generator(vocoder)
        info = {key: value for key, value in self.info.items() if key != "vocoder"}
        return Checkpoint(dataclasses.replace(self.config, vocoder=vocoder), self.acoustic, generator.eval(),
                          trained=False, info=info)

    def stages(self, config: ModelConfig | None = None) -> dict[str, nn.Module]:
        """Inference stages (eval mode, fp32, weight norm folded) keyed by Triton model name.

        ``config`` (default: the checkpoint's) may change what serving chooses, such as the decoder
        steps per call; its networks must have the checkpoint's weights' shapes. Works on copies, so the
        checkpoint itself stays trainable.
        """
        config = config or self.config
        generator = inference_generator(config.vocoder, {k: v.float() for k, v in self.generator.state_dict().items()})
        acoustic = AcousticModel(config)
        acoustic.load_state_dict({k: v.float() for k, v in self.acoustic.state_dict().items()})
        return build_stages(acoustic, generator)

    def save(self, path: Path, *, half: bool = False) -> None:
        """Write the checkpoint; ``half`` stores floating tensors as fp16 (the shipped default)."""

        def state(module: nn.Module) -> dict[str, torch.Tensor]:
            sd = module.state_dict()
            return {k: v.half() if half and v.is_floating_point() else v for k, v in sd.items()}

        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"format": FORMAT, "config": self.config.to_dict(), "acoustic": state(self.acoustic),
                    "generator": state(self.generator), "trained": self.trained, "info": self.info}, path)


def init_checkpoint(config: ModelConfig | None = None, seed: int = DEFAULT_SEED) -> Checkpoint:
    """Deterministic seeded initialisation (untrained)."""
    config = config or ModelConfig()
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        acoustic = AcousticModel(config)
        generator = build_generator(config.vocoder)
    return Checkpoint(config, acoustic.eval(), generator.eval(), trained=False,
                      info={"name": f"untrained-seed{seed}", "seed": seed})


def _read(path: Path) -> dict[str, Any]:
    """What a checkpoint file holds (see the module docstring); ``ValueError`` when it is not such a file."""
    try:
        data = torch.load(path, map_location="cpu", weights_only=False)
    except (pickle.UnpicklingError, RuntimeError, EOFError) as exc:
        raise ValueError(f"{path} could not be read as a checkpoint: {exc}") from exc
    found = data.get("format") if isinstance(data, dict) else type(data).__name__
    if found != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT} checkpoint (format={found!r})")
    return data


def read_config(path: Path) -> ModelConfig:
    """The :class:`ModelConfig` stored in a checkpoint file, without building its networks."""
    return ModelConfig.from_dict(_read(path)["config"])


def load_checkpoint(path: Path, *, any_mel: bool = False) -> Checkpoint:
    """Load a checkpoint file written by :meth:`Checkpoint.save` (fp16 tensors come back as fp32).

    Raises ``ValueError`` when its networks read another mel than :mod:`tts_triton.core.audio` computes,
    unless ``any_mel`` (for :mod:`tts_triton.training.remel`, which carries such a checkpoint over).
    """
    data = _read(path)
    config = ModelConfig.from_dict(data["config"])
    if not any_mel:
        try:
            config.check_mel()
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
    acoustic = AcousticModel(config)
    acoustic.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in data["acoustic"].items()})
    generator = build_generator(config.vocoder)
    load_generator_state(generator, {k: v.float() for k, v in data["generator"].items()})
    return Checkpoint(config, acoustic.eval(), generator.eval(), bool(data.get("trained")), dict(data.get("info", {})))


def load_default() -> Checkpoint:
    """The shipped default voice, or the seeded untrained initialisation when none ships yet."""
    if DEFAULT_CHECKPOINT.exists():
        return load_checkpoint(DEFAULT_CHECKPOINT)
    log.warning("%s", UNTRAINED_LABEL)
    return init_checkpoint()


def resolve(path: Path | None) -> Checkpoint:
    """``path`` if given, else the default."""
    return load_checkpoint(path) if path else load_default()


def fingerprint(ckpt: Checkpoint) -> str:
    """SHA-256 over the config and all weights: identifies what a built repository was made from."""
    h = hashlib.sha256(repr(sorted(ckpt.config.to_dict().items())).encode())
    for module in (ckpt.acoustic, ckpt.generator):
        for key, value in sorted(module.state_dict().items()):
            h.update(key.encode())
            h.update(value.detach().float().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()
