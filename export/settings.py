"""The serving knobs of a model repository build: :class:`NetworkSettings` per network model and
:class:`RepositorySettings` for the whole repository, each target's defaults, and the overrides the CLIs and the
bench apply to them (:func:`with_fields`, :func:`tuned`). :mod:`tts_triton.export.repository` writes them into
the models' configs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tts_triton.core.config import ModelConfig
from tts_triton.core.contract import DECODER, ENSEMBLES, STYLE_ENCODER, TEXT_ENCODER, VOCODER

from .targets import GPU_TARGET, KIND_CPU, KIND_GPU, RUNTIME_TARGETS

__all__ = ["NetworkSettings", "RepositorySettings", "default_max_streams", "tuned", "with_fields"]

@dataclass(frozen=True)
class NetworkSettings:
    """Serving knobs of one network model.

    ``max_batch_size`` must not exceed what the artifact accepts (ONNX: batch axis dynamic, any size;
    TensorRT: the engine's optimization profile). ``response_cache`` takes effect only when the server
    runs with ``--cache-config local,size=<bytes>``. ``kind`` (``KIND_CPU``/``KIND_GPU``) overrides the
    target's instance kind for this network (Python-backend targets). ``batch_budget`` (``torch-cuda``)
    bounds rows x tokens (or mel frames) of one device call: see
    :class:`~tts_triton.engine.graphs.StageRunner`.
    """

    max_batch_size: int
    max_queue_delay_us: int
    instances: int = 1
    intra_op_threads: int = 1
    inter_op_threads: int = 1
    response_cache: bool = False
    kind: str | None = None
    batch_budget: int | None = None


def _default_networks() -> dict[str, NetworkSettings]:
    return {
        TEXT_ENCODER: NetworkSettings(max_batch_size=16, max_queue_delay_us=1000, intra_op_threads=2),
        STYLE_ENCODER: NetworkSettings(max_batch_size=16, max_queue_delay_us=0, response_cache=True),
        DECODER: NetworkSettings(max_batch_size=64, max_queue_delay_us=1000, intra_op_threads=2),
        VOCODER: NetworkSettings(max_batch_size=16, max_queue_delay_us=2000, intra_op_threads=2),
    }


def _gpu_networks() -> dict[str, NetworkSettings]:
    """The ``torch-cuda`` defaults: a CUDA graph replay costs about the same at any batch size, so batches
    are large. No queue delay: requests that arrive while an instance is busy form the next batch anyway
    (ragged batches allowed), and a delay would only hold back a lone stream. The style encoder runs once per
    request with reference audio, eagerly (reference lengths vary), batched by 8. Two decoder, two vocoder and eight
    BLS instances: a model's per-call work on the host (its stub's hand-over, merging, copies) runs beside the other
    instance's graph replay. Batch budgets (rows x tokens, rows x mel frames) keep the CUDA graphs an instance holds
    for its largest calls to what typical batches need. The measurements behind each number: "Numbers behind the
    serving defaults" in docs/records/bench/history.md."""
    return {
        TEXT_ENCODER: NetworkSettings(max_batch_size=32, max_queue_delay_us=0, batch_budget=32 * 256),
        STYLE_ENCODER: NetworkSettings(max_batch_size=8, max_queue_delay_us=0, response_cache=True),
        DECODER: NetworkSettings(max_batch_size=128, max_queue_delay_us=0, instances=2, batch_budget=128 * 64),
        VOCODER: NetworkSettings(max_batch_size=64, max_queue_delay_us=0, instances=2, batch_budget=64 * 48),
    }


def default_max_streams(target: str) -> int:
    """The admission bound a target's repository gets: 256 streams on a GPU, 32 on the CPU target; past them a
    new stream only slows the others (measured: "Numbers behind the serving defaults" in
    docs/records/bench/history.md)."""
    runtime = RUNTIME_TARGETS.get(target)
    return 256 if runtime is not None and runtime.instance_kind == KIND_GPU else 32


@dataclass(frozen=True)
class RepositorySettings:
    """Per-model serving knobs of a repository build."""

    networks: Mapping[str, NetworkSettings] = field(default_factory=_default_networks)
    #: ``KIND_CPU`` or ``KIND_GPU`` for every network model; ``None`` keeps the target's kind.
    instance_kind: str | None = None
    #: Instances of ``tts`` and of ``tts_offline`` (the BLS is async: one instance serves many streams).
    bls_instances: int = 1
    #: ``torch-cuda`` only: fp16 weights (the vocoder's mel match stays fp32), CUDA graphs, and the decoder
    #: steps per call when serving should differ from the checkpoint's (``None`` keeps it).
    fp16: bool = True
    cuda_graphs: bool = True
    steps_per_call: int | None = None
    #: The BLS's streams put their first chunk first (``StreamingConfig.first_chunk_first``): lower first-chunk
    #: latency under load for less throughput.
    first_chunk_first: bool = False
    #: Admission bound: the most requests in flight in ``tts`` (and, apart, in ``tts_offline``) over all their
    #: instances; more are refused at once (UNAVAILABLE). 0: no bound. See :func:`default_max_streams`.
    max_streams: int = 0
    #: Threads of each BLS process's network calls (:class:`~tts_triton.triton.utils.CallThreads`); 0: the Python
    #: stub's default executor for ``tts`` (cpu_count + 4 threads, at most 32), 64 for ``tts_offline``. Keep it below
    #: the server's ``--backend-config=python,thread-pool-size`` (32 by default).
    bls_call_threads: int = 0

    @classmethod
    def for_target(cls, target: str, **overrides: Any) -> RepositorySettings:
        """The default settings of ``target`` (GPU-sized batches for ``torch-cuda``), with ``overrides``.

        ``networks`` may map a network's name to a mapping of :class:`NetworkSettings` fields instead of a whole
        one: those fields replace the target's defaults, e.g. ``networks={"vocoder": {"instances": 1}}``."""
        defaults: dict[str, Any] = {"networks": _default_networks()}
        if target == GPU_TARGET:  # K=16: more throughput than 8 at the same first chunk (docs/records/bench/history.md)
            defaults = {"networks": _gpu_networks(), "bls_instances": 8, "steps_per_call": 16}
        networks = overrides.pop("networks", None)
        if networks is not None and not all(isinstance(n, NetworkSettings) for n in networks.values()):
            networks = with_fields(defaults["networks"], networks)
        overrides = {**defaults, **overrides, **({"networks": networks} if networks is not None else {})}
        overrides.setdefault("max_streams", default_max_streams(target))
        return cls(**overrides)

    def serving_config(self, model_config: ModelConfig) -> ModelConfig:
        """``model_config`` as served: with :attr:`steps_per_call` applied."""
        if self.steps_per_call is None:
            return model_config
        decoder = dataclasses.replace(model_config.decoder, steps_per_call=self.steps_per_call)
        return dataclasses.replace(model_config, decoder=decoder)

    def max_batch_sizes(self) -> dict[str, int]:
        """Triton's ``max_batch_size`` of every network model and ensemble (an ensemble: its smallest member's)."""
        sizes = {name: net.max_batch_size for name, net in self.networks.items()}
        return {**sizes, **{name: min(sizes[m] for m in members) for name, members in ENSEMBLES.items()}}

    def validate(self, network_names: Sequence[str]) -> None:
        """Raise ``ValueError`` unless every network has sane settings and nothing else is configured."""
        if sorted(self.networks) != sorted(network_names):
            raise ValueError(
                f"settings configure networks {sorted(self.networks)}, the contract has {sorted(network_names)}"
            )
        if {self.instance_kind, *(net.kind for net in self.networks.values())} - {None, KIND_CPU, KIND_GPU}:
            raise ValueError(f"instance kinds must be {KIND_CPU} or {KIND_GPU}: {self}")
        if self.bls_instances < 1:
            raise ValueError(f"bls_instances must be >= 1, got {self.bls_instances}")
        if self.max_streams < 0:
            raise ValueError(f"max_streams must be >= 0 (0: no bound), got {self.max_streams}")
        if self.bls_call_threads < 0:
            raise ValueError(f"bls_call_threads must be >= 0 (0: the default), got {self.bls_call_threads}")
        if self.steps_per_call is not None and self.steps_per_call < 1:
            raise ValueError(f"steps_per_call must be >= 1, got {self.steps_per_call}")
        for name, net in self.networks.items():
            if net.max_batch_size < 1 or net.instances < 1 or net.max_queue_delay_us < 0:
                raise ValueError(f"{name}: need max_batch_size >= 1, instances >= 1, max_queue_delay_us >= 0: {net}")
            if net.batch_budget is not None and net.batch_budget < 1:
                raise ValueError(f"{name}: batch_budget must be >= 1 when given: {net}")


def with_fields(networks: Mapping[str, NetworkSettings],
                 fields: Mapping[str, Mapping[str, Any]]) -> dict[str, NetworkSettings]:
    """``networks`` with some fields replaced: network name -> {NetworkSettings field: value}; an unknown network
    or field raises ``ValueError``."""
    known = {f.name for f in dataclasses.fields(NetworkSettings)}
    merged = dict(networks)
    for name, changes in fields.items():
        if name not in merged or not isinstance(changes, Mapping) or set(changes) - known:
            raise ValueError(f"networks: {name!r}: {changes!r}: expected a network of {sorted(merged)} mapped to "
                             f"fields of {sorted(known)}")
        merged[name] = dataclasses.replace(merged[name], **changes)
    return merged


def tuned(settings: RepositorySettings, knobs: Mapping[str, Sequence[str]]) -> RepositorySettings:
    """``settings`` with per-network overrides: knob (a NetworkSettings field) -> ``["decoder=2", ...]``."""
    fields: dict[str, dict[str, int]] = {}
    for knob, values in knobs.items():
        for value in values:
            name, _, number = value.partition("=")
            if name not in settings.networks or not number.isdigit():
                raise ValueError(f"{value!r}: expected NETWORK=N with NETWORK one of {sorted(settings.networks)}")
            fields.setdefault(name, {})[knob] = int(number)
    return dataclasses.replace(settings, networks=with_fields(settings.networks, fields))
