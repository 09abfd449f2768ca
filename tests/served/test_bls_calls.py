"""How many network calls a BLS process keeps in flight, against the real tritonserver 2.51 and its Python stub.

Two pools cap them. In the stub, each ``async_exec`` runs on the event loop's default executor: Python's holds
cpu_count + 4 threads (at most 32), whatever the streams ask for, unless the project's
:class:`~tts_triton.triton.utils.CallThreads` is installed (``bls_call_threads``). In the server, each Python-
backend instance carries its BLS calls on a pool of ``--backend-config=python,thread-pool-size`` threads (32 by
default). A ``fan`` BLS sends 40 calls at once to a ``hold`` model whose dynamic batcher gathers them for 0.3 s and
answers each with the batch it was in: the largest batch is how many calls were in flight together.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from tts_triton.processes.triton_server import TritonServer

CALLS = 40  # above Python's default executor on any host (at most 32 threads)

HOLD_CONFIG = """\
name: "hold"
backend: "python"
max_batch_size: 64
input [ { name: "X", data_type: TYPE_FP32, dims: [ 1 ] } ]
output [ { name: "BATCH", data_type: TYPE_INT32, dims: [ 1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 300000 }
instance_group [ { count: 1, kind: KIND_CPU } ]
"""

HOLD_MODEL = """\
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        time.sleep(0.1)
        batch = np.array([[len(requests)]], np.int32)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("BATCH", batch)]) for _ in requests]
"""

FAN_CONFIG = """\
name: "fan"
backend: "python"
max_batch_size: 0
input [ { name: "WIDEN", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "MAX_BATCH", data_type: TYPE_INT32, dims: [ 1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
"""

FAN_MODEL = """\
import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils

from tts_triton.triton.utils import CallThreads

CALLS = {calls}


class TritonPythonModel:
    def initialize(self, args):
        self.calls = CallThreads(CALLS)

    async def call(self):
        request = pb_utils.InferenceRequest(model_name="hold", requested_output_names=["BATCH"],
                                            inputs=[pb_utils.Tensor("X", np.zeros((1, 1), np.float32))])
        response = await request.async_exec()
        if response.has_error():
            raise RuntimeError(response.error().message())
        return int(pb_utils.get_output_tensor_by_name(response, "BATCH").as_numpy()[0, 0])

    async def execute(self, requests):
        responses = []
        for request in requests:
            if pb_utils.get_input_tensor_by_name(request, "WIDEN").as_numpy()[0]:
                self.calls.install()
            batches = await asyncio.gather(*(self.call() for _ in range(CALLS)))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("MAX_BATCH", np.array([max(batches)],
                                                                                                np.int32))]))
        return responses

    def finalize(self):
        self.calls.close()
"""


def write_models(repo: Path) -> Path:
    for name, config, model in (("hold", HOLD_CONFIG, HOLD_MODEL), ("fan", FAN_CONFIG, FAN_MODEL.format(calls=CALLS))):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(config)
        (repo / name / "1" / "model.py").write_text(model)
    return repo


def largest_batch(server: TritonServer, widen: bool) -> int:
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
    inp = httpclient.InferInput("WIDEN", [1], "INT32")
    inp.set_data_from_numpy(np.array([int(widen)], np.int32))
    try:
        return int(client.infer("fan", [inp]).as_numpy("MAX_BATCH")[0])
    finally:
        client.close()


def test_a_bls_process_keeps_all_its_calls_in_flight_with_its_own_threads_and_the_servers_pool(
        tmp_path: Path, make_triton: Callable[..., TritonServer]) -> None:
    repo = write_models(tmp_path / "repo")
    server = make_triton(repo)
    server.start()
    assert largest_batch(server, widen=False) <= min(32, (os.cpu_count() or 1) + 4)  # Python's default executor
    assert largest_batch(server, widen=True) == 32  # the server's pool of the instance's BLS calls
    server.stop()
    wide = make_triton(repo, extra_args=[f"--backend-config=python,thread-pool-size={CALLS}"])
    wide.start()
    assert largest_batch(wide, widen=True) == CALLS  # every call reached the batcher together
