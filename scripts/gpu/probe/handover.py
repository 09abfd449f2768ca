"""What one BLS call costs in Triton's Python backend, apart from the model's own work: a trivial ``sink`` model
(echoes its first input into every output) called from a BLS ``driver`` in rounds of N concurrent calls, for
1 or 6 input tensors (1 or 4 outputs) of 0.25 or 64 KiB each. Per variant: a round's median time (at N=1, the
floor of one network hop of the decode loop), the sink's executions and average batch, and per execution
Triton's compute_infer against the sink's own ``execute``: the rest is the stub's hand-over (requests in from,
responses out to shared memory).

    python3 scripts/gpu/probe/handover.py [--triton-home DIR] [--rounds 200]
"""

import argparse
import statistics
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient

from tts_triton.embedded import embedded_server

SINKS = {"sink_1": (1, 1), "sink_6": (6, 4)}  # model -> (inputs, outputs)
SINK = textwrap.dedent("""
    import time
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def initialize(self, args):
            self.n_in, self.n_out = {counts}
            family = pb_utils.MetricFamily(name="probe_execute_seconds", description="sink execute seconds",
                                           kind=pb_utils.MetricFamily.COUNTER)
            self.family, self.seconds = family, family.Metric(labels={{"model": args["model_name"]}})

        def execute(self, requests):
            began = time.perf_counter()
            responses = []
            for request in requests:
                ins = [pb_utils.get_input_tensor_by_name(request, f"x{{i}}").as_numpy() for i in range(self.n_in)]
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor(f"y{{j}}", ins[0])
                                                             for j in range(self.n_out)]))
            self.seconds.increment(time.perf_counter() - began)
            return responses

        def finalize(self):
            del self.seconds
            del self.family
""")
DRIVER = textwrap.dedent("""
    import asyncio
    import time
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        async def one(self, model, n_in, elems):
            x = np.ones((1, elems), np.float32)
            request = pb_utils.InferenceRequest(model_name=model, requested_output_names=["y0"],
                                                inputs=[pb_utils.Tensor(f"x{i}", x) for i in range(n_in)])
            response = await request.async_exec()
            if response.has_error():
                raise RuntimeError(response.error().message())

        async def execute(self, requests):
            for request in requests:
                n_in, n, elems, rounds = (int(v) for v in
                                          pb_utils.get_input_tensor_by_name(request, "CFG").as_numpy())
                model = f"sink_{n_in}"
                ms = []
                for _ in range(rounds):
                    began = time.perf_counter()
                    await asyncio.gather(*(self.one(model, n_in, elems) for _ in range(n)))
                    ms.append((time.perf_counter() - began) * 1e3)
                sender = request.get_response_sender()
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("MS", np.array(ms))]),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return None
""")


def _tensors(prefix: str, n: int) -> str:
    """Config entries of ``n`` FP32 [-1] tensors named ``prefix0``, ``prefix1`` ..."""
    return ", ".join(f'{{ name: "{prefix}{i}" data_type: TYPE_FP32 dims: [ -1 ] }}' for i in range(n))


def write_repository(root: Path) -> None:
    for name, (n_in, n_out) in SINKS.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "model.py").write_text(SINK.format(counts=(n_in, n_out)))
        (root / name / "config.pbtxt").write_text(
            f'name: "{name}"\nbackend: "python"\nmax_batch_size: 128\ndynamic_batching {{ }}\n'
            f'input [ {_tensors("x", n_in)} ]\noutput [ {_tensors("y", n_out)} ]\n'
            'instance_group [ { kind: KIND_CPU count: 1 } ]\n')
    (root / "driver" / "1").mkdir(parents=True)
    (root / "driver" / "1" / "model.py").write_text(DRIVER)
    (root / "driver" / "config.pbtxt").write_text(
        'name: "driver"\nbackend: "python"\nmax_batch_size: 0\nmodel_transaction_policy { decoupled: true }\n'
        'input [ { name: "CFG" data_type: TYPE_INT32 dims: [ 4 ] } ]\n'
        'output [ { name: "MS" data_type: TYPE_FP64 dims: [ -1 ] } ]\n'
        'instance_group [ { kind: KIND_CPU count: 1 } ]\n')


def sink_counters(client: grpcclient.InferenceServerClient, metrics_url: str,
                  model: str) -> tuple[int, int, float, float]:
    """(executions, requests, compute_infer seconds, execute seconds) of a sink so far."""
    with urllib.request.urlopen(metrics_url) as page:
        metrics = page.read().decode()
    stats = client.get_inference_statistics(model, as_json=True)["model_stats"][0]
    infer = stats["inference_stats"]
    execute = 0.0
    for line in metrics.splitlines():
        if line.startswith("probe_execute_seconds") and f'model="{model}"' in line:
            execute = float(line.rsplit(" ", 1)[1])
    return (int(stats.get("execution_count", 0)), int(infer["success"].get("count", 0)),
            int(infer["compute_infer"].get("ns", 0)) / 1e9, execute)


def run_variant(client: grpcclient.InferenceServerClient, metrics_url: str, n_in: int, n: int, kib: float,
                rounds: int) -> str:
    model = f"sink_{n_in}"
    elems = int(kib * 1024 / 4)
    cfg = np.array([n_in, n, elems, rounds], np.int32)
    results: list[np.ndarray] = []
    client.start_stream(callback=lambda result, error: results.append(error or result.as_numpy("MS")))
    try:
        client.async_stream_infer("driver", [_input(np.array([n_in, n, elems, 10], np.int32))])  # warm-up
        _wait(results, 1)
        before = sink_counters(client, metrics_url, model)
        client.async_stream_infer("driver", [_input(cfg)])
        _wait(results, 2)
    finally:
        client.stop_stream()
    after = sink_counters(client, metrics_url, model)
    if not isinstance(results[1], np.ndarray):
        raise RuntimeError(str(results[1]))
    execs, reqs, infer, execute = (a - b for a, b in zip(after, before, strict=True))
    handover = (infer - execute) / execs * 1e3
    return (f"| {n_in} in / {SINKS[model][1]} out | {kib:g} | {n} | {statistics.median(results[1]):.3f} | {execs} | "
            f"{reqs / execs:.1f} | {infer / execs * 1e3:.3f} | {execute / execs * 1e3:.3f} | {handover:.3f} | "
            f"{handover / (reqs / execs) * 1e3:.0f} |")


def _input(cfg: np.ndarray) -> grpcclient.InferInput:
    tensor = grpcclient.InferInput("CFG", [4], "INT32")
    tensor.set_data_from_numpy(cfg)
    return tensor


def _wait(results: list, count: int, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while len(results) < count:
        if time.monotonic() > end:
            raise TimeoutError("the driver did not answer")
        time.sleep(0.01)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--triton-home", type=Path, help="a Triton bundle (GPU host); default: nvidia-pytriton's")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--server-arg", action="append", default=[], help="an extra tritonserver argument")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        write_repository(Path(tmp))
        server = embedded_server(Path(tmp), args.triton_home, extra_args=args.server_arg)
        with server:
            client = grpcclient.InferenceServerClient(server.grpc_url)
            print("| tensors | KiB each | N concurrent | round p50 ms | sink executions | avg batch | compute_infer "
                  "ms/exec | execute ms/exec | hand-over ms/exec | hand-over µs/request |")
            print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
            for n_in in (1, 6):
                for kib in (0.25, 64):
                    for n in (1, 32):
                        print(run_variant(client, server.metrics_url, n_in, n, kib, args.rounds), flush=True)


if __name__ == "__main__":
    main()
