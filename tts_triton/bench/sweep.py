"""``tts-triton bench``: streaming latency and throughput of the ``tts`` model at several concurrencies.

    tts-triton bench                                  # embedded server on free loopback ports, default levels
    tts-triton bench --url localhost:8001 --concurrency 1 8 32 --seconds 120
    tts-triton bench --target torch-cuda --quick --out runs/bench-gpu     # a GPU host, a few minutes

For each concurrency C, C closed-loop workers stream a fixed, deterministic mix of sentences over
gRPC (:class:`~tts_triton.client.AsyncTTSClient`), in ``--client-processes`` processes beyond 32 streams
(:mod:`tts_triton.bench.clients`). Requests started during the first ``--seconds``
(at most ``--requests`` if given, at least 32) are *measured*; afterwards the workers keep C streams in flight with
unmeasured *filler* requests until every measured request has finished (or ``--grace`` expires;
requests still running are then cancelled and reported as cut off), so that every measured request
ran under the same load. Throughput counts all audio received while the load was held. Triton's
per-model statistics are read before and after each level and diffed.

In the same run (GPU hosts): the *eager baseline* (``--baseline-device``), the project's PyTorch stages in a
child process through the same decode loop, batch 1, at ``--baseline-concurrency`` (measured before the server
starts); GPU memory from Triton's metrics before, between and after the levels; with ``--soak N``, N more
requests at the best concurrency with GPU memory sampled every few seconds. With ``--repeat-ratio R ...`` every
level runs once per ratio, a share R of its requests repeating earlier texts, and the report shows the server's
utterance-cache hit rate. With ``--goals FILE`` the report ends with those goals, checked against this run.

Writes into ``--out`` (default ``runs/bench``): ``BENCHMARKS.md`` (the report), ``concurrency.png`` (the plot),
``bench.json`` (every raw number), all three rewritten after every level, so a run cut off midway leaves the
levels it finished; and, for the embedded server, its log ``tritonserver.log``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import shlex
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tts_triton.bench.baseline import BaselinePlan, baseline_device, run_baseline
from tts_triton.bench.clients import STREAMS_PER_PROCESS, ClientPool, SplitLevel, client_processes
from tts_triton.bench.describe import describe_machine, describe_server, sentence_rows
from tts_triton.bench.goals import Ceiling, Goals
from tts_triton.bench.load import MIN_MEASURED, ControlledClient, LoadLevel, now, run_soak, wait_idle, warm_up
from tts_triton.bench.plot import plot
from tts_triton.bench.prometheus import cache_lookups, fetch_metrics, gpu_memory_bytes
from tts_triton.bench.report import (
    LEVEL_HEADERS,
    MODEL_HEADERS,
    Report,
    cpu_processes_line,
    level_line,
    level_row,
    model_row,
    read_bench_text,
    reference_level,
    render_markdown,
    report_json,
)
from tts_triton.bench.stats import (
    BEST_P99_MS,
    CpuSample,
    LevelResult,
    MemorySample,
    MemoryTrend,
    best_level,
    counter_delta,
    diff_stats,
    summarize,
)
from tts_triton.bench.workload import Workload
from tts_triton.core.contract import CONTROLS
from tts_triton.core.paths import default_model_repository
from tts_triton.jobs.tables import text_table
from tts_triton.processes.embedded import embedded_server, triton_home
from tts_triton.processes.triton_install import TritonServerError

__all__ = ["QUICK", "STANDARD", "main", "parser"]

MAX_CONCURRENCY = 256
#: The levels and their rules, by default and with --quick (which fits a whole GPU run in a few minutes).
STANDARD = {"concurrency": [1, 4, 16], "seconds": 30.0, "grace": 90.0, "warmup": 2, "baseline_concurrency": [1, 64]}
QUICK = {"concurrency": [1, 8, 32, 64], "seconds": 5.0, "grace": 20.0, "warmup": 2, "baseline_concurrency": [1, 64]}
REPORT, PLOT, DUMP, SERVER_LOG = "BENCHMARKS.md", "concurrency.png", "bench.json", "tritonserver.log"


def _assignment(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, not {text!r}")
    return name, value


def parser() -> argparse.ArgumentParser:
    """The ``tts-triton bench`` argument parser."""
    from tts_triton.export.targets import AUTO, DEFAULT_TARGET, embedded_targets

    p = argparse.ArgumentParser(prog="tts-triton bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", action="append", metavar="ENDPOINT",
                   help="gRPC address host:port of a running server (default: start the embedded server on free "
                        "loopback ports and stop it afterwards); repeat it or give a comma-separated list (or "
                        "dns:///NAME:PORT) to load several servers through the client's balancer: the server "
                        "description and per-model statistics are then the first endpoint's")
    p.add_argument("--metrics-url", help="with --url: the server's Prometheus metrics page, for GPU memory and "
                                         "cache hits (e.g. http://localhost:8002/metrics)")
    p.add_argument("--target", default=DEFAULT_TARGET, choices=[AUTO, *embedded_targets()],
                   help="runtime target the embedded server's repository is built for (default %(default)s; "
                        "torch-cuda needs a CUDA GPU and a CUDA build of PyTorch; auto: torch-cuda when they are "
                        "there, else onnxruntime-python)")
    p.add_argument("--model-repository", type=Path, default=default_model_repository(),
                   help="repository the embedded server serves, built if needed (default %(default)s)")
    p.add_argument("--triton-home", type=Path, default=triton_home(),
                   help="an unpacked Triton bundle (bin/, backends/python/, stub/, libs/, caches/; see "
                        "tts_triton/processes/embedded.py) to run instead of the nvidia-pytriton wheel's server "
                        "(default: $TRITON_HOME if set)")
    p.add_argument("--repository-setting", type=_assignment, action="append", default=[], metavar="NAME=VALUE",
                   help="a field of the repository's settings (RepositorySettings in export/repository.py) for the "
                        "embedded server, VALUE as JSON or else a string, e.g. steps_per_call=32 or "
                        "networks='{\"vocoder\": {\"instances\": 1}}' (fields of one network; the rest keep the "
                        "target's defaults); repeatable")
    p.add_argument("--server-env", type=_assignment, action="append", default=[], metavar="NAME=VALUE",
                   help="an environment variable of the embedded server and its models; repeatable")
    p.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                   help="an argument of the embedded server's tritonserver command line (after the project's own, so "
                        "it overrides them), e.g. --server-arg=--backend-config=python,thread-pool-size=64; "
                        "repeatable")
    p.add_argument("--cache", action="store_true",
                   help="give the embedded server an utterance cache: a private redis-server (the Debian package's "
                        "binary) on a free loopback port for the run, its log in --out; with --repeat-ratio the "
                        "report's hit rate then counts its hits")
    p.add_argument("--quick", action="store_true",
                   help="levels {concurrency} with --seconds {seconds:g} --grace {grace:g} (a whole GPU run in a few "
                        "minutes); explicit options win".format(**{**QUICK, "concurrency": " ".join(
                            map(str, QUICK["concurrency"]))}))
    p.add_argument("--concurrency", type=int, nargs="+",
                   help=f"levels, 1-{MAX_CONCURRENCY} (default {' '.join(map(str, STANDARD['concurrency']))})")
    p.add_argument("--requests", type=int,
                   help=f"measured requests per level at most (default: no cap, --seconds bounds them, but at least "
                        f"{MIN_MEASURED})")
    p.add_argument("--seconds", type=float,
                   help=f"per level, measured requests start only during this many seconds (default "
                        f"{STANDARD['seconds']:g})")
    p.add_argument("--grace", type=float,
                   help=f"per level, seconds after --seconds for measured requests to finish before they are "
                        f"cancelled (default {STANDARD['grace']:g})")
    p.add_argument("--client-processes", type=int, metavar="P",
                   help=f"client processes that share each level's streams (default: one per {STREAMS_PER_PROCESS} "
                        "streams, at most a quarter of this machine's cores; never more than the level's streams)")
    p.add_argument("--warmup", type=int, help=f"unmeasured requests, one at a time (default {STANDARD['warmup']})")
    p.add_argument("--repeat-ratio", type=float, nargs="+", metavar="R",
                   help="run every level once per ratio R (0-1): that share of its requests repeats a text of the "
                        "run whose synthesis completed, the rest speak new texts; the report shows the server's "
                        "utterance-cache hit rate (default: the plain sentence cycle)")
    for name, control in CONTROLS.items():
        p.add_argument(f"--{name.lower()}", type=float, metavar="X",
                       help=f"every served request sets {name} to X ({control.low:g} to {control.high:g} "
                            f"{control.unit}; default: not set, as trained)")
    p.add_argument("--baseline-device", default="auto", choices=("auto", "cuda", "cpu", "none"),
                   help="device of the eager PyTorch baseline measured in the same run (auto: cuda when available, "
                        "else none)")
    p.add_argument("--baseline-concurrency", type=int, nargs="+",
                   help="the baseline's levels (default 1 64)")
    p.add_argument("--mps", action="store_true",
                   help="run the embedded server's CUDA processes under an MPS daemon of its own (as serve --mps)")
    p.add_argument("--soak", type=int, default=0, metavar="N",
                   help="after the sweep, N requests at the best concurrency with GPU memory sampled (default 0: no "
                        "soak)")
    p.add_argument("--soak-seconds", type=float, default=300.0,
                   help="the soak's requests start within this many seconds (default %(default)s)")
    p.add_argument("--memory-every", type=float, default=5.0,
                   help="seconds between GPU memory samples during the soak (default %(default)s)")
    p.add_argument("--goals", type=Path,
                   help="a goals file (TOML or JSON; example: docs/bench-goals.toml) to judge this run against")
    p.add_argument("--ceiling", type=Path,
                   help="the in-process ceiling measured beside this run (scripts/gpu/probe/ceiling.py --json FILE): "
                        "the report sets the best level against it (the goal x_real_time_vs_ceiling)")
    p.add_argument("--reference", type=Path,
                   help="the bench.json of an earlier run whose best aggregate this run's is compared with (the "
                        "goal scale_vs_reference)")
    p.add_argument("--out", type=Path, default=Path("runs/bench"),
                   help=f"folder for {REPORT}, {PLOT}, {DUMP} and {SERVER_LOG} (default %(default)s)")
    return p


def parse(argv: list[str]) -> argparse.Namespace:
    """The arguments, with the standard or --quick levels filled in; exits on a bad one."""
    p = parser()
    args = p.parse_args(argv)
    for name, value in (QUICK if args.quick else STANDARD).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    levels = [*args.concurrency, *args.baseline_concurrency]
    if any(not 1 <= c <= MAX_CONCURRENCY for c in levels):
        p.error(f"concurrency levels must be 1-{MAX_CONCURRENCY}")
    if args.seconds <= 0 or args.grace < 0 or args.warmup < 0 or args.soak < 0 or args.memory_every <= 0:
        p.error("--seconds and --memory-every must be positive, --grace, --warmup and --soak not negative")
    if any(not 0.0 <= r <= 1.0 for r in args.repeat_ratio or []):
        p.error("--repeat-ratio values must be within 0-1")
    for name, control in CONTROLS.items():
        value = getattr(args, name.lower())
        if value is not None and not control.low <= value <= control.high:
            p.error(f"--{name.lower()} {value:g} is outside {control.low:g} to {control.high:g} {control.unit}")
    if args.client_processes is not None and args.client_processes < 1:
        p.error("--client-processes must be at least 1")
    if args.cache and args.url:
        p.error("--cache starts a Redis for the embedded server; a server at --url has its own configuration")
    return args


@dataclass(frozen=True)
class ServerUnderTest:
    """The server being measured: its gRPC address, metrics page and, for the embedded server, its repository,
    process group, runtime label and log file."""

    url: str
    metrics_url: str | None = None
    repository: Path | None = None
    process_group: int | None = None
    runtime: str = "triton"
    log_file: Path | None = None


def _setting_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


@contextlib.contextmanager
def _server(args: argparse.Namespace, say: Callable[[str], None]) -> Iterator[ServerUnderTest]:
    """``--url``, or the embedded server on free loopback ports for the duration of the block."""
    if args.url:
        yield ServerUnderTest(",".join(args.url), args.metrics_url)
        return
    from tts_triton.export.build import ensure_repository
    from tts_triton.export.repository import RepositorySettings
    from tts_triton.export.targets import cuda_torch, resolve_target

    choice = resolve_target(args.target)
    say(f"target {choice.name} ({choice.reason})")
    if choice.runtime.cuda_torch and not (usable := cuda_torch())[0]:
        raise TritonServerError(f"--target {choice.name} needs a CUDA GPU and a CUDA build of PyTorch: {usable[1]}")
    try:
        settings = RepositorySettings.for_target(choice.name, **{name: _setting_value(value)
                                                                 for name, value in args.repository_setting})
        repository = ensure_repository(args.model_repository, target=choice.name, settings=settings)
    except (TypeError, ValueError) as err:  # an unknown setting or target, a checkpoint that does not fit
        raise TritonServerError(f"cannot build {args.model_repository}: {err}") from None
    environment = dict(args.server_env)
    with contextlib.ExitStack() as stack:
        if args.cache:
            from tts_triton.cache.settings import ENV_PREFIX
            from tts_triton.processes.local_redis import LocalRedis

            try:
                redis = stack.enter_context(LocalRedis(args.out))
            except RuntimeError as err:  # no redis-server binary, or it did not start
                raise TritonServerError(f"--cache: {err}") from None
            environment.setdefault(ENV_PREFIX + "REDIS_URL", redis.url)
            say(f"utterance cache: a private redis-server at {redis.url}")
        server = embedded_server(repository, args.triton_home, mps=args.mps, environment=environment,
                                 extra_args=[*choice.runtime.server_args, *args.server_arg])
        say(f"starting the embedded tritonserver{f' from {args.triton_home}' if args.triton_home else ''} "
            f"(log: {server.log_file}) ...")
        with server:
            yield ServerUnderTest(server.grpc_url, server.metrics_url, repository, server.pid,
                                  f"triton {choice.name}", server.log_file)


@dataclass
class _Run:
    """One benchmark run in progress: the arguments, the report being filled in, the texts of each repeat ratio,
    the served model config (for the sentence table) and the plot's title."""

    args: argparse.Namespace
    report: Report
    model_config: str
    title: str
    workloads: dict[float | None, Workload]
    started: float = field(default_factory=now)
    say: Callable[[str], None] = print
    url: str = ""
    controls: dict[str, float] = field(default_factory=dict)
    pool: ClientPool | None = None

    def processes(self, concurrency: int) -> int:
        """Client processes for a level of ``concurrency`` streams."""
        chosen = self.args.client_processes or client_processes(concurrency)
        return min(chosen, concurrency)

    def level(self, client: Any, workload: Workload, concurrency: int, requests: int | None, seconds: float,
              label: str) -> LoadLevel | SplitLevel:
        """A level's load: in this process, or split over :meth:`processes` client processes of ``pool``."""
        processes = self.processes(concurrency)
        if processes == 1 or self.pool is None:
            return LoadLevel(client, workload, concurrency, requests, seconds, self.args.grace, label)
        return SplitLevel(self.pool, self.url, self.controls, workload, concurrency, requests, seconds,
                          self.args.grace, processes, label)

    def clock(self) -> float:
        """Seconds since the run started."""
        return now() - self.started

    def publish(self) -> None:
        """(Re)write the report, the plot and the JSON dump with what has been measured so far."""
        r, out = self.report, self.args.out
        r.sentences = sentence_rows([*r.levels, *r.baseline], self.model_config)
        series: dict[str, list[Any]] = {}
        for level in r.levels:
            key = "" if level.repeat_ratio is None or len(self.workloads) == 1 else f"{level.repeat_ratio:.0%} rep."
            series.setdefault(key, []).append(summarize(level))
        plot(series, [summarize(level) for level in r.baseline], out / PLOT, self.title)
        out.mkdir(parents=True, exist_ok=True)
        (out / REPORT).write_text(render_markdown(r))
        (out / DUMP).write_text(report_json(r))

    async def memory_sample(self, label: str, metrics_url: str | None) -> MemorySample:
        """A GPU memory sample taken now."""
        page = await asyncio.to_thread(fetch_metrics, metrics_url)
        return MemorySample(label, self.clock(), gpu_memory_bytes(page) if page else None)

    async def memory(self, label: str, metrics_url: str | None) -> None:
        """Append a GPU memory sample to the report."""
        sample = await self.memory_sample(label, metrics_url)
        self.report.memory.append(sample)
        used = sample.used
        self.say(f"  GPU memory {label}: " + ("n/a (no GPU metrics)" if used is None else f"{used / 2**30:,.2f} GiB"))


async def _cache_counts(metrics_url: str | None) -> dict[str, float]:
    page = await asyncio.to_thread(fetch_metrics, metrics_url)
    return cache_lookups(page) if page else {}


async def _measure(run: _Run, server: Any, tested: ServerUnderTest, level: LoadLevel,
                   soak: bool = False) -> tuple[LevelResult, list[MemorySample]]:
    """Run ``level`` with the model statistics, CPU usage and cache lookups around it (and, for the soak, GPU memory
    sampled during it)."""
    before = await wait_idle(server)
    cache_before = await _cache_counts(tested.metrics_url)
    cpu_before = CpuSample.read(tested.process_group)
    samples: list[MemorySample] = []
    if soak:
        result, samples = await run_soak(level, lambda label: run.memory_sample(label, tested.metrics_url),
                                         run.args.memory_every)
    else:
        result = await level.run()
    cpu_after = CpuSample.read(tested.process_group)
    result.cpu_busy, result.cpu_steal, result.cpu_own = CpuSample.usage(cpu_before, cpu_after)
    result.cpu_processes = CpuSample.by_process(cpu_before, cpu_after)
    result.cpu_seconds = CpuSample.seconds_by_kind(cpu_before, cpu_after)
    result.models = diff_stats(before, await wait_idle(server))
    result.cache = counter_delta(cache_before, await _cache_counts(tested.metrics_url))
    return result, samples


async def _sweep(run: _Run, server: Any, client: Any, tested: ServerUnderTest) -> None:
    args = run.args
    for ratio, workload in run.workloads.items():
        label = "" if ratio is None else f"R={ratio:g} "
        for concurrency in args.concurrency:
            run.say(f"level {label}c={concurrency}: measured requests start within {args.seconds:g} s"
                    f"{'' if args.requests is None else f' (at most {args.requests})'}")
            load = run.level(client, workload, concurrency, args.requests, args.seconds, label)
            level, _ = await _measure(run, server, tested, load)
            run.report.levels.append(level)
            run.say(level_line(summarize(level), f"{tested.runtime} {label}".strip()))
            await run.memory(f"after {label}c={concurrency}", tested.metrics_url)
            run.publish()


async def _soak(run: _Run, server: Any, client: Any, tested: ServerUnderTest) -> None:
    args = run.args
    summaries = [summarize(level) for level in run.report.levels]
    best = best_level(summaries, BEST_P99_MS) or max(summaries, key=lambda s: s.audio_per_second, default=None)
    concurrency = best.concurrency if best else args.concurrency[-1]
    run.say(f"soak: {args.soak} requests at c={concurrency}, GPU memory every {args.memory_every:g} s")
    workload = next(iter(run.workloads.values()))
    load = run.level(client, workload, concurrency, args.soak, args.soak_seconds, "soak ")
    level, samples = await _measure(run, server, tested, load, soak=True)
    run.report.soak, run.report.soak_memory = level, samples
    trend = MemoryTrend.of(samples)
    growth = f"{trend.growth / 2**20:+,.0f} MiB" if trend else "n/a"
    run.say(f"{level_line(summarize(level), 'soak')}; GPU memory growth {growth}")
    run.publish()


async def _bench(run: _Run, tested: ServerUnderTest) -> None:
    """Describe the server into ``run.report``, then warm-up, sweep and soak, publishing after every step."""
    import tritonclient.grpc.aio as grpcclient_aio

    from tts_triton.client import AsyncTTSClient

    server = grpcclient_aio.InferenceServerClient(tested.url.split(",")[0])  # the first endpoint's facts
    try:
        info = await describe_server(server, tested.url, tested.repository, tested.process_group)
        if info.trained is not True:
            run.say("note: the served weights are not trained; see the report")
        report = run.report
        report.server, report.trained, report.settings = info.facts, info.trained, info.settings
        report.runtime = tested.runtime
        run.model_config = info.parameters.get("model_config", "")
        run.title = (f"tts over gRPC ({tested.runtime}), checkpoint {info.parameters.get('checkpoint_name', '?')}"
                     f"{'' if info.trained else ' (UNTRAINED)'}, {report.date}")
        await run.memory("start", tested.metrics_url)
        run.publish()
        controls = {name.lower(): getattr(run.args, name.lower()) for name in CONTROLS}
        run.url, run.controls = tested.url, {k: v for k, v in controls.items() if v is not None}
        processes = max(run.processes(c) for c in run.args.concurrency)
        async with AsyncTTSClient(tested.url) as plain:
            client = ControlledClient(plain, **run.controls)
            await warm_up(client, next(iter(run.workloads.values())), run.args.warmup, run.say)
            with ClientPool(processes) if processes > 1 else contextlib.nullcontext() as run.pool:
                if processes > 1:
                    run.say(f"client processes: up to {processes} per level")
                await _sweep(run, server, client, tested)
                if run.args.soak:
                    await _soak(run, server, client, tested)
        await run.memory("end", tested.metrics_url)
        run.publish()
    finally:
        await server.close()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (see the module docstring); returns the exit status: 0, 1 if any request failed, 2 if
    the server could not be started or reached or the baseline device is missing."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = shlex.join(["tts-triton", "bench", *argv])
    args = parse(argv[1:] if argv[:1] == ["--"] else argv)  # `tts-triton bench -- --help`

    def say(message: str) -> None:
        print(message, flush=True)

    from tritonclient.utils import InferenceServerException

    from tts_triton.client import TTSError

    date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    try:
        device = baseline_device(args.baseline_device)
        goals = Goals.load(args.goals) if args.goals else None
        ceiling = Ceiling.load(args.ceiling) if args.ceiling else None
    except ValueError as err:  # GoalsError included
        print(f"error: {err}", file=sys.stderr)
        return 2
    if device is None:
        say("eager baseline: not measured (--baseline-device none, or auto without CUDA)")
    try:
        p99 = goals.reference_p99_ms(BEST_P99_MS) if goals else BEST_P99_MS
        reference = reference_level(read_bench_text(args.reference), p99) if args.reference else None
    except (OSError, ValueError, KeyError, TypeError) as err:
        parser().error(f"--reference {args.reference}: not a bench.json ({type(err).__name__}: {err})")
    ratios = args.repeat_ratio or [None]
    levels, failure = [], ""
    if device:
        plan = BaselinePlan(device, tuple(args.baseline_concurrency), args.requests, args.seconds, args.grace,
                            args.warmup, ratios[0])
        levels, failure = run_baseline(plan, say)
    report = Report(date=date, command=command, machine=describe_machine(), server=[], trained=None, settings={},
                    levels=[], sentences=[], plot=PLOT, warmup=args.warmup, seconds=args.seconds, grace=args.grace,
                    baseline=levels, baseline_runtime=f"eager {device}", notes=[failure] if failure else [],
                    reference=reference, goals=goals, goals_file=str(args.goals or ""), ceiling=ceiling)
    run = _Run(args, report, model_config="", title=f"tts over gRPC, {date}",
               workloads={ratio: Workload(ratio) for ratio in ratios}, say=say)
    if device:
        run.publish()  # the baseline is kept even if the server never comes up
    try:
        with _server(args, say) as tested:
            try:
                asyncio.run(_bench(run, tested))
            finally:
                if tested.log_file and tested.log_file.exists():
                    args.out.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(tested.log_file, args.out / SERVER_LOG)
    except (InferenceServerException, TTSError, TritonServerError) as err:
        print(f"error: benchmark of {','.join(args.url or ['the embedded server'])} failed: {err}", file=sys.stderr)
        return 2
    print("\n" + text_table(LEVEL_HEADERS, [level_row(s, r) for r, s in report.rows()]))
    for level in report.levels:
        print(f"\nconcurrency {level.concurrency}:\n" + text_table(MODEL_HEADERS, [model_row(m) for m in level.models]))
        if level.cpu_processes:
            print(f"CPU by process, % of one core (processes): {cpu_processes_line(level)}")
    print(f"\nwrote {args.out / REPORT}, {args.out / PLOT} and {args.out / DUMP}")
    return 1 if any(r.error for level in report.levels for r in level.records) else 0
