"""The BLS's request coalescer: concurrent streams' calls as one request, each stream getting its own rows."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from tts_triton.core.contract import ModelSpec, TensorSpec, f32
from tts_triton.serving.coalesce import Coalescer

#: A network with a masked token axis: ``y`` = 2 x ``x`` where the mask is set (zero in the padding), ``total`` =
#: the row's masked sum; and one without masked axes (fixed shapes per call).
MASKED = ModelSpec("masked", inputs=(f32("x", "tokens"), f32("mask", "tokens")),
                   outputs=(f32("y", "tokens"), f32("total", 1)), masked_axes=("tokens",))
PLAIN = ModelSpec("plain", inputs=(TensorSpec("x", "float32", ("frames",)),), outputs=(f32("y", "frames"),))


class Recording:
    """The backend behind the coalescer: computes row by row, records each request's row count and shapes."""

    def __init__(self, fail: bool = False) -> None:
        self.requests: list[tuple[str, tuple[int, ...]]] = []
        self.fail = fail

    async def infer(self, model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.requests.append((model, inputs["x"].shape))
        await asyncio.sleep(0.001)
        if self.fail:
            raise RuntimeError(f"model {model!r} failed")
        if model == "masked":
            y = 2 * inputs["x"] * inputs["mask"]
            return {"y": y, "total": y.sum(axis=1, keepdims=True)}
        return {"y": inputs["x"] + 1}


def masked_feed(length: int, seed: int) -> dict[str, np.ndarray]:
    x = np.random.default_rng(seed).normal(size=(1, length)).astype(np.float32)
    return {"x": x, "mask": np.ones((1, length), np.float32)}


def coalescer(backend: Recording, max_rows: int = 64) -> Coalescer:
    return Coalescer(backend, {"masked": MASKED, "plain": PLAIN}, {"masked": max_rows, "plain": max_rows})


async def gather_calls(c: Coalescer, calls: list[tuple[str, dict[str, np.ndarray]]]) -> list[Any]:
    return await asyncio.gather(*(c.infer(model, feed) for model, feed in calls), return_exceptions=True)


def test_concurrent_calls_of_different_lengths_are_one_request_and_each_gets_its_own_rows() -> None:
    backend = Recording()
    feeds = [masked_feed(n, seed) for seed, n in enumerate((32, 64, 32, 128))]
    results = asyncio.run(gather_calls(coalescer(backend), [("masked", f) for f in feeds]))
    assert backend.requests == [("masked", (4, 128))]
    for feed, result in zip(feeds, results, strict=True):
        assert result["y"].shape == feed["x"].shape  # cut back to its own length
        np.testing.assert_allclose(result["y"], 2 * feed["x"])
        np.testing.assert_allclose(result["total"], 2 * feed["x"].sum(axis=1, keepdims=True), rtol=1e-5)


def test_calls_whose_fixed_shapes_differ_go_as_one_request_per_shape() -> None:
    backend = Recording()
    feeds = [{"x": np.full((1, n), i, np.float32)} for i, n in enumerate((48, 96, 48, 96, 96))]
    results = asyncio.run(gather_calls(coalescer(backend), [("plain", f) for f in feeds]))
    assert sorted(backend.requests) == [("plain", (2, 48)), ("plain", (3, 96))]
    for feed, result in zip(feeds, results, strict=True):
        np.testing.assert_array_equal(result["y"], feed["x"] + 1)


def test_a_request_holds_at_most_max_rows() -> None:
    backend = Recording()
    feeds = [{"x": np.full((1, 8), i, np.float32)} for i in range(7)]
    results = asyncio.run(gather_calls(coalescer(backend, max_rows=3), [("plain", f) for f in feeds]))
    assert [shape[0] for _, shape in backend.requests] == [3, 3, 1]
    assert [float(r["y"][0, 0]) for r in results] == [i + 1.0 for i in range(7)]


def test_a_lone_call_goes_out_unchanged_and_unknown_models_pass_through() -> None:
    backend = Recording()
    feed = masked_feed(32, 0)

    async def main() -> tuple[Any, Any]:
        c = Coalescer(backend, {"masked": MASKED}, {"masked": 8})
        return await c.infer("masked", feed), await c.infer("plain", {"x": np.zeros((1, 4), np.float32)})

    alone, passed = asyncio.run(main())
    assert backend.requests == [("masked", (1, 32)), ("plain", (1, 4))]
    np.testing.assert_allclose(alone["y"], 2 * feed["x"])
    np.testing.assert_array_equal(passed["y"], np.ones((1, 4), np.float32))


@pytest.mark.parametrize(("open_streams", "sent_at_once", "requests"), [(1, 2, [1, 1]), (2, 0, [2])])
def test_calls_go_straight_through_while_one_stream_is_open(open_streams: int, sent_at_once: int,
                                                             requests: list[int]) -> None:
    """With one stream open nobody can join its calls: they reach the backend in the iteration they are made, one
    request each; with more open, calls made together wait to go as one."""
    backend = Recording()

    async def main() -> int:
        c = Coalescer(backend, {"plain": PLAIN}, {"plain": 8}, streams=lambda: open_streams)
        calls = [asyncio.ensure_future(c.infer("plain", {"x": np.full((1, 8), i, np.float32)})) for i in range(2)]
        await asyncio.sleep(0)  # one iteration: the calls have been made
        sent = len(backend.requests)
        assert [float(r["y"][0, 0]) for r in await asyncio.gather(*calls)] == [1.0, 2.0]
        return sent

    assert asyncio.run(main()) == sent_at_once
    assert [shape[0] for _, shape in backend.requests] == requests


@pytest.mark.parametrize(("iterations", "requests"), [((0, 0, 1, 2), [4]), ((0, 1), [1, 1]), ((0, 0, 3), [2, 1])])
def test_calls_wait_for_more_only_while_more_arrive(iterations: tuple[int, ...], requests: list[int]) -> None:
    """Streams woken together reach their next call after different amounts of work (loop iterations): the calls
    wait an iteration for more only while the last one brought some, so a lone call goes out at once."""
    backend = Recording()

    async def stream(i: int, wait: int) -> dict[str, np.ndarray]:
        for _ in range(wait):
            await asyncio.sleep(0)
        return await c.infer("plain", {"x": np.full((1, 8), i, np.float32)})

    async def main() -> list[dict[str, np.ndarray]]:
        return await asyncio.gather(*(stream(i, wait) for i, wait in enumerate(iterations)))

    c = coalescer(backend)
    results = asyncio.run(main())
    assert [shape[0] for _, shape in backend.requests] == requests
    assert [float(r["y"][0, 0]) for r in results] == [i + 1.0 for i in range(len(iterations))]


def test_a_cancelled_caller_leaves_the_others_their_results() -> None:
    backend = Recording()

    async def main() -> tuple[list[Any], asyncio.Task]:
        c = coalescer(backend)
        tasks = [asyncio.ensure_future(c.infer("plain", {"x": np.full((1, 8), i, np.float32)})) for i in range(3)]
        await asyncio.sleep(0)  # all three are waiting for the request
        tasks[1].cancel()
        return await asyncio.gather(*tasks, return_exceptions=True), tasks[1]

    results, cancelled = asyncio.run(main())
    assert cancelled.cancelled()
    assert float(results[0]["y"][0, 0]) == 1.0 and float(results[2]["y"][0, 0]) == 3.0


def test_a_failed_request_fails_each_of_its_callers() -> None:
    backend = Recording(fail=True)
    results = asyncio.run(gather_calls(coalescer(backend), [("plain", {"x": np.zeros((1, 8), np.float32)})] * 3))
    assert len(backend.requests) == 1
    assert all(isinstance(r, RuntimeError) and "'plain' failed" in str(r) for r in results)


@pytest.mark.parametrize("streams", [1, 5])
def test_calls_in_sequence_each_wait_for_their_own_result(streams: int) -> None:
    """A stream's next call depends on its last result: each round goes out as one request of all streams."""
    backend = Recording()

    async def stream(i: int) -> float:
        value = np.full((1, 8), i, np.float32)
        for _ in range(4):
            value = (await c.infer("plain", {"x": value}))["y"]
        return float(value[0, 0])

    async def main() -> list[float]:
        return await asyncio.gather(*(stream(i) for i in range(streams)))

    c = coalescer(backend)
    assert asyncio.run(main()) == [i + 4.0 for i in range(streams)]
    assert backend.requests == [("plain", (streams, 8))] * 4
