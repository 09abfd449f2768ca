"""Run one network stage on a device for a batch of requests; on CUDA, as captured CUDA graphs.

:class:`StageRunner` takes the requests of one dynamic batch as numpy feeds (the tensors of the
stage's contract spec, batch axis first), merges those whose shapes agree (or differ only along the
stage's masked axes: zero-padded to the longest, see :class:`~tts_triton.engine.batching.Padding`),
pads the batch to a :func:`~tts_triton.core.shapes.batch_buckets` size and runs the stage once per group. On CUDA, every
combination of batch bucket and bucketed axis size that the decode loop sends (:mod:`tts_triton.core.shapes`)
is captured once as a CUDA graph by :meth:`StageRunner.warm_up`; a call is then a copy into pinned host
memory, one host-to-device copy per input, one graph replay and one copy back, which the calling thread waits for
asleep on a blocking CUDA event: CUDA's default wait (a process of one context on a host of many cores) spins a core
for the whole replay, CPU the serving host's other processes need. A shape with no graph (the style encoder's
reference mels, or any stage off CUDA) runs eagerly on its real batch.

Numerics: inputs and outputs are the contract's dtypes (fp32, int32). With ``half=True`` the stage's
weights are fp16 (:func:`~tts_triton.models.stages.half_precision`; the mel match stays fp32) and the
casts happen inside the graph. Padding rows are zeros and are cut away before anything is returned;
every network is row-independent, so padding never changes a real row's result.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from tts_triton.core import shapes
from tts_triton.core.config import smallest_bucket
from tts_triton.core.contract import ModelSpec
from tts_triton.engine.batching import Feed, Padding, batch_groups, merge, pad_rows, rows, split
from tts_triton.models.stages import half_precision

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "int32": torch.int32, "int64": torch.int64,
                "bool": torch.bool}


@dataclass
class CapturedCall:
    """One CUDA graph with its static device tensors and their pinned host mirrors."""

    graph: torch.cuda.CUDAGraph
    inputs: list[Tensor]
    outputs: list[Tensor]
    host_inputs: list[Tensor]
    host_outputs: list[Tensor]


class StageRunner:
    """Runs ``stage`` (a :mod:`tts_triton.models.stages` module) on ``device`` for batches of requests.

    ``max_batch_size`` bounds the rows of one call (Triton's ``max_batch_size``); ``axes`` gives the
    values each dynamic axis takes (default :func:`tts_triton.core.shapes.axis_values`). ``batch_budget``, when
    given, also bounds rows x the dynamic axes' sizes (tokens, mel frames) of one call, at least one row: a
    bigger batch runs as several calls, and no graph is captured beyond it. It bounds a process's GPU memory
    (the largest graph's activations and the shared input buffers) by the work of a call, not by its rows.
    """

    def __init__(self, stage: nn.Module, spec: ModelSpec, *, device: str | torch.device = "cpu", half: bool = False,
                 max_batch_size: int = 1, axes: Mapping[str, shapes.AxisValues] | None = None,
                 batch_budget: int | None = None) -> None:
        self.device = torch.device(device)
        self.stage = stage.to(self.device).eval()
        if half:
            half_precision(self.stage)
        self.dtype = torch.float16 if half else torch.float32
        self.spec = spec
        self.padding = Padding.of(spec)
        self.batch_sizes = shapes.batch_buckets(max_batch_size)
        self.batch_budget = batch_budget
        self.axes = dict(axes or shapes.axis_values())
        self.calls: dict[tuple, CapturedCall] = {}
        self.bucketed = set(self.graph_shapes())
        self._pool = torch.cuda.graph_pool_handle() if self.device.type == "cuda" else None
        self._done = torch.cuda.Event(blocking=True) if self.device.type == "cuda" else None  # a replay's end

    def graph_shapes(self) -> list[tuple[tuple[int, ...], ...]]:
        """The non-batch shapes of the inputs, one tuple per captured combination of bucketed axis sizes;
        empty when an input has a dynamic axis without buckets (such a stage always runs eagerly)."""
        names = sorted({d for t in self.spec.inputs for d in t.dims if isinstance(d, str)})
        if any(not self.axes[name].buckets for name in names):
            return []
        combos = itertools.product(*(self.axes[name].buckets for name in names))
        return [tuple(tuple(sizes.get(d, d) for d in t.dims) for t in self.spec.inputs)
                for sizes in (dict(zip(names, combo, strict=True)) for combo in combos)]

    def max_rows(self, input_shapes: tuple[tuple[int, ...], ...]) -> int:
        """The most rows one call of these (non-batch) input shapes runs: the largest batch bucket within the
        batch budget, at least the smallest bucket."""
        if self.batch_budget is None:
            return self.batch_sizes[-1]
        sizes = {d: size for t, shape in zip(self.spec.inputs, input_shapes, strict=True)
                 for d, size in zip(t.dims, shape, strict=True) if isinstance(d, str)}
        per_row = math.prod(sizes.values())
        return max([b for b in self.batch_sizes if b * per_row <= self.batch_budget], default=self.batch_sizes[0])

    def warm_up(self, progress: Callable[[str], None] | None = None) -> int:
        """Capture every (batch bucket, input shapes) as a CUDA graph; the number captured (0 off CUDA).

        All graphs share one memory pool and, per input, one device buffer and one pinned host buffer
        (views of the largest size): replays run one at a time, each one's inputs written just before it.
        Later calls must run with ``self.device`` as the current CUDA device."""
        if self._pool is None:
            return 0
        combos = [(batch, shapes_) for shapes_ in self.graph_shapes() for batch in self.batch_sizes
                  if batch <= self.max_rows(shapes_)]
        if not combos:
            return 0
        buffers = []
        for i, t in enumerate(self.spec.inputs):
            n, dtype = max(batch * math.prod(shapes_[i]) for batch, shapes_ in combos), TORCH_DTYPES[t.dtype]
            buffers.append((torch.zeros(n, dtype=dtype, device=self.device), _pinned(n, dtype)))
        with torch.cuda.device(self.device):
            side = torch.cuda.Stream(self.device)  # one warm-up stream: each new stream gets its own cuBLAS workspace
            for batch, input_shapes in combos:
                self.calls[(batch, input_shapes)] = self._capture(batch, input_shapes, buffers, side)
                if progress and batch == self.max_rows(input_shapes):
                    progress(f"{self.spec.name}: {len(self.calls)} CUDA graphs captured (inputs {input_shapes})")
            torch.cuda.synchronize(self.device)
            host_outputs = _shared_hosts([call.outputs for call in self.calls.values()])
            for call, hosts in zip(self.calls.values(), host_outputs, strict=True):
                call.host_outputs = hosts
            torch.cuda.empty_cache()  # the warm-up's eager blocks; the graphs keep their pool
        return len(self.calls)

    def run(self, feeds: Sequence[Feed], outputs: Collection[str] | None = None) -> list[dict[str, np.ndarray]]:
        """The ``outputs`` (default: all) of every request by contract name, batch axis first, contract dtypes,
        in order.

        Requests that differ only along the stage's masked axes (the token axis of the encoder and the
        decoder) run as one call, padded to the longest of them."""
        names = [n for n in self.spec.output_names if outputs is None or n in outputs]
        results: list[dict[str, np.ndarray]] = [{} for _ in feeds]
        for group in batch_groups(feeds, padding=self.padding):
            members = [feeds[i] for i in group]
            merged = merge(members, self.padding)
            merged_out = self._run_rows(merged, rows(merged), names)
            for i, result in zip(group, split(merged_out, members, self.padding), strict=True):
                results[i] = result
        return results

    def _run_rows(self, feed: Feed, n: int, names: list[str]) -> dict[str, np.ndarray]:
        """Outputs ``names`` of one merged feed of ``n`` rows, in calls of at most :meth:`max_rows` rows."""
        input_shapes = tuple(feed[name].shape[1:] for name in self.spec.input_names)
        step = self.max_rows(input_shapes)
        if n > step:
            parts = [self._run_rows({k: v[i : i + step] for k, v in feed.items()}, min(step, n - i), names)
                     for i in range(0, n, step)]
            return {name: np.concatenate([p[name] for p in parts]) for name in names}
        batch = smallest_bucket(n, self.batch_sizes, "rows")
        call = self.calls.get((batch, input_shapes))
        if call is not None:
            return self._replay(call, feed, n, names)
        if input_shapes in self.bucketed:  # what a graph would compute, eagerly: the same padded batch
            padded = self._eager({name: pad_rows(array, batch) for name, array in feed.items()})
            return {name: padded[name][:n] for name in names}
        computed = self._eager(feed)
        return {name: computed[name] for name in names}

    def _replay(self, call: CapturedCall, feed: Feed, n: int, names: list[str]) -> dict[str, np.ndarray]:
        for name, host, device in zip(self.spec.input_names, call.host_inputs, call.inputs, strict=True):
            target = host.numpy()
            target[:n] = feed[name]
            target[n:] = 0
            device.copy_(host, non_blocking=True)
        call.graph.replay()
        copied = []
        for name, host, device in zip(self.spec.output_names, call.host_outputs, call.outputs, strict=True):
            if name in names:
                host.copy_(device, non_blocking=True)
                copied.append((name, host))
        self._done.record(torch.cuda.current_stream(self.device))
        self._done.synchronize()  # asleep until the copies are done (blocking=True), not spinning
        return {name: host.numpy()[:n].copy() for name, host in copied}

    def _eager(self, feed: Feed) -> dict[str, np.ndarray]:
        with torch.inference_mode():
            inputs = [torch.from_numpy(np.ascontiguousarray(feed[name])).to(self.device) for name in
                      self.spec.input_names]
            outputs = self._forward(*inputs)
            return {name: out.cpu().numpy() for name, out in zip(self.spec.output_names, outputs, strict=True)}

    def _forward(self, *inputs: Tensor) -> tuple[Tensor, ...]:
        cast = [x.to(self.dtype) if x.is_floating_point() else x for x in inputs]
        return tuple(out.float() for out in self.stage(*cast))

    def _capture(self, batch: int, input_shapes: tuple[tuple[int, ...], ...],
                 buffers: Sequence[tuple[Tensor, Tensor]], side: torch.cuda.Stream) -> CapturedCall:
        sizes = [(batch, *shape) for shape in input_shapes]
        inputs = [device[: math.prod(size)].view(size) for (device, _), size in zip(buffers, sizes, strict=True)]
        hosts = [host[: math.prod(size)].view(size) for (_, host), size in zip(buffers, sizes, strict=True)]
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.inference_mode(), torch.cuda.stream(side):
            for _ in range(2):  # kernels and workspaces are chosen outside the capture
                self._forward(*inputs)
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.inference_mode(), torch.cuda.graph(graph, pool=self._pool):
            outputs = list(self._forward(*inputs))
        return CapturedCall(graph, inputs, outputs, hosts, [])


def _pinned(numel: int, dtype: torch.dtype) -> Tensor:
    return torch.empty(numel, dtype=dtype, device="cpu", pin_memory=True)


def _shared_hosts(outputs: Sequence[Sequence[Tensor]]) -> list[list[Tensor]]:
    """Pinned host mirrors of every call's outputs, as views of one buffer per output position."""
    hosts = [_pinned(max(out[i].numel() for out in outputs), outputs[0][i].dtype) for i in range(len(outputs[0]))]
    return [[host[: x.numel()].view(x.shape) for host, x in zip(hosts, out, strict=True)] for out in outputs]
