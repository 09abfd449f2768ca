"""Shared fixtures: free loopback ports, and real Triton servers started for a test's model repository.

The user's cache stays untouched: the session points ``$XDG_CACHE_HOME`` (read by :mod:`tts_triton.core.paths` at
every call, and inherited by the servers and commands the tests start) at a temporary folder, and a test during
which this process still writes into the user's ``tts-triton`` cache folder fails, naming what it wrote.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tts_triton.core.config import DecoderConfig, ModelConfig, StyleEncoderConfig, TextEncoderConfig
from tts_triton.processes import exec_after_fork_only
from tts_triton.processes.ports import PORTS_ENV, port_range
from tts_triton.processes.triton_install import TritonServerError
from tts_triton.processes.triton_server import TritonServer, free_ports

exec_after_fork_only()  # before the test modules import grpc: they start servers beside their gRPC clients

# --- Session guard: whatever a test starts is ended with the session, even when the test fails. ---

#: Environment variable (value: pytest's pid) that every process the tests start inherits, orphans included.
SESSION_MARK = "TTS_TRITON_TEST_SESSION"


def pytest_sessionstart(session: pytest.Session) -> None:
    os.environ[SESSION_MARK] = str(os.getpid())


# --- Ports: the session's servers take theirs from one range (TTS_TRITON_PORTS), each under a lock. ---

#: How many ports the suite takes its servers' from when not asked (a run uses a few hundred).
DEFAULT_PORT_COUNT = 2000


def default_test_ports(local_range: str | None = None) -> str:
    """The ports the suite takes when :data:`PORTS_ENV` asks for none: the :data:`DEFAULT_PORT_COUNT` just below
    the kernel's local port range (``local_range``, ``"LOW HIGH"``, read from /proc when None), or just above it
    when too little lies below; the kernel hands out no port outside that range for port 0 or an outgoing
    connection, so between its pick and a server's bind a port is taken only by someone asking for it by number."""
    if local_range is None:
        local_range = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
    low, high = map(int, local_range.split())
    if low - DEFAULT_PORT_COUNT >= 1024:
        return f"{low - DEFAULT_PORT_COUNT}-{low - 1}"
    return f"{high + 1}-{min(high + DEFAULT_PORT_COUNT, 65535)}"


def pytest_configure(config: pytest.Config) -> None:
    """Every port the session and what it starts pick (:func:`~tts_triton.processes.ports.free_port`) comes from
    the range :data:`PORTS_ENV` asks for, or :func:`default_test_ports`; a malformed one stops the run here.
    ``--file-progress`` reports by file (:class:`FileProgress`) where the results are printed (not on xdist workers)."""
    os.environ.setdefault(PORTS_ENV, default_test_ports())
    port_range()
    if config.getoption("file_progress") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(FileProgress(config), "file-progress")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--file-progress", action="store_true",
                     help="a line per test file as its last test ends (its counts, its tests' seconds, the run's "
                          "progress) instead of a character per test")


class FileProgress:
    """Prints ``path: 12 passed, 1 failed in 34.5 s [120/1144]`` when the last test of a file ends, and nothing per
    test; with xdist, on the controller, from the workers' reports."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.left: dict[str, int] = {}  # tests not yet ended, per file
        self.outcomes: dict[str, dict[str, int]] = {}
        self.seconds: dict[str, float] = {}
        self.worst: dict[str, str] = {}  # per test not yet ended: its outcome so far
        self.total = self.ended = 0

    def _expect(self, nodeids: list[str]) -> None:
        if not self.total:  # each xdist worker collects the same tests
            for nodeid in nodeids:
                path = nodeid.split("::")[0]
                self.left[path] = self.left.get(path, 0) + 1
            self.total = len(nodeids)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._expect([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self._expect(ids)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_report_teststatus(self, report: pytest.TestReport) -> Iterator[None]:
        outcome = yield
        if (result := outcome.get_result()) and isinstance(result, tuple):
            category, _, word = result
            outcome.force_result((category, "", word))  # no character per test

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        path = report.nodeid.split("::")[0]
        self.seconds[path] = self.seconds.get(path, 0.0) + report.duration
        state = ("failed" if report.when == "call" else "error") if report.failed else report.outcome
        if self.worst.get(report.nodeid, "passed") == "passed":  # a test's first phase not passed tells its outcome
            self.worst[report.nodeid] = state
        if report.when != "teardown":
            return
        final = self.worst.pop(report.nodeid)
        counts = self.outcomes.setdefault(path, {})
        counts[final] = counts.get(final, 0) + 1
        self.ended += 1
        self.left[path] = self.left.get(path, 1) - 1
        if self.left[path] <= 0:
            summary = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
            terminal = self.config.pluginmanager.get_plugin("terminalreporter")
            terminal.write_line(f"{path}: {summary} in {self.seconds[path]:.1f} s [{self.ended}/{self.total}]")


def pytest_report_header(config: pytest.Config) -> str:
    return f"ports: {PORTS_ENV}={os.environ[PORTS_ENV]}"


def _marked_processes() -> list[int]:
    """Live processes, other than this one, whose environment carries this session's mark."""
    mark = f"{SESSION_MARK}={os.getpid()}".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        pid = int(environ.parent.name)
        try:
            if pid != os.getpid() and mark in environ.read_bytes().split(b"\0"):
                found.append(pid)
        except OSError:  # gone, or another user's
            continue
    return found


def _end_leftovers() -> list[str]:
    """Kill every process the session left running (fixtures have stopped theirs by now); say which, and the peak
    memory of this process and of its largest waited-for child (the suite's budget: 3 GB)."""
    import resource

    own, child = (resource.getrusage(who).ru_maxrss // 1024 for who in (resource.RUSAGE_SELF,
                                                                       resource.RUSAGE_CHILDREN))
    lines = [f"session peak memory: pytest {own} MiB, largest child {child} MiB"]
    for pid in _marked_processes():
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if not command:  # a zombie: already dead
                continue
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
        lines.append(f"session guard: killed pid {pid}, left running: {command[:160]}")
    return lines


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The guard of a session that runs tests: a plain one prints, an xdist worker sends its lines to the
    controller (printed by ``pytest_testnodedown``); the controller runs none and guards nothing of its own."""
    if session.config.pluginmanager.has_plugin("dsession"):  # the xdist controller
        return
    lines = _end_leftovers()
    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["guard"] = lines
    else:
        print("".join(f"\n{line}" for line in lines), file=sys.stderr)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist controller: print what each worker's guard said."""
    for line in getattr(node, "workeroutput", {}).get("guard", []):
        print(f"\n[{node.gateway.id}] {line}", file=sys.stderr)


def like_a_terminal() -> None:
    """``preexec_fn`` for a child that must take Ctrl-C as a terminal's foreground job does: SIGINT at its default,
    even when this pytest was started with it ignored (a background job of a non-interactive shell, as CI may be),
    since a Python or bash started with SIGINT ignored never reacts to it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


#: What a bare GPU host's Python lacks beside its torch and numpy (scripts/gpu/train.sh runs the trainers there, and
#: the probes that need no server run there too).
BARE_HOST_MISSING = ("tritonclient", "soundfile")


def run_on_a_bare_host(target: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``target``, a module (``tts_triton.x.y``) or a script (a ``.py`` path), as ``__main__`` with ``args`` in a
    fresh Python that cannot import :data:`BARE_HOST_MISSING`, as on the GPU host's own Python."""
    main = (f"sys.argv[0] = {target!r}\nrunpy.run_path(sys.argv[0], run_name='__main__')\n" if target.endswith(".py")
            else f"runpy.run_module({target!r}, run_name='__main__', alter_sys=True)\n")
    hide = f"sys.modules.update(dict.fromkeys({BARE_HOST_MISSING!r}))  # importing them raises\n"
    run = f"import runpy, sys\n{hide}{main}"
    return subprocess.run([sys.executable, "-c", run, *args], capture_output=True, text=True, timeout=300, env=env,
                          check=False)


#: A model small enough that a CPU training step takes well under a second (the vocoder stays v2). Its style
#: encoder halves the mel axis six times, down to 2 from 80 bins and from 128, so its GRU width is layout-free.
TINY = ModelConfig(
    text=TextEncoderConfig(dim=32, layers=1, heads=2, ffn_dim=64),
    style=StyleEncoderConfig(conv_channels=(4, 4, 4, 4, 4, 4), gru_dim=16, tokens=4, heads=2, dim=16),
    decoder=DecoderConfig(prenet_dims=(32, 32), attention_rnn_dim=32, decoder_rnn_dim=32, attention_dim=16,
                          location_filters=4, location_kernel=5, frames_per_step=3, postnet_dim=16, postnet_layers=2),
)


@dataclass(frozen=True)
class TritonPorts:
    """Three distinct TCP ports that were free on 127.0.0.1 when picked."""

    http: int
    grpc: int
    metrics: int

    def kwargs(self) -> dict[str, int]:
        """Keyword arguments for ``TritonServer``."""
        return {"http_port": self.http, "grpc_port": self.grpc, "metrics_port": self.metrics}


def pick_ports() -> TritonPorts:
    """Three distinct free loopback ports of the session's range."""
    return TritonPorts(*free_ports(3))


#: Seconds a stopping test server waits for in-flight work and model unloading (Triton's default: 30).
EXIT_TIMEOUT_S = 5


def new_server(model_repository: Path, **kwargs: Any) -> TritonServer:
    """A ``TritonServer`` (not started) on free loopback ports; ``kwargs`` go to ``TritonServer`` and win.

    ``extra_args`` are appended to ``--exit-timeout-secs=EXIT_TIMEOUT_S``, so that a model that does not
    unload costs a test seconds, not half a minute.
    """
    kwargs["extra_args"] = [f"--exit-timeout-secs={EXIT_TIMEOUT_S}", *kwargs.get("extra_args", ())]
    return TritonServer(model_repository, **{**pick_ports().kwargs(), **kwargs})


@pytest.fixture
def make_triton(tmp_path: Path) -> Iterator[Callable[..., TritonServer]]:
    """``make_triton(model_repository, **kwargs) -> TritonServer``: a server on free loopback ports, not started.

    ``kwargs`` go to ``TritonServer``; its log is ``tmp_path/triton-<n>.log``. Stopped after the test.
    """
    servers: list[TritonServer] = []

    def make(model_repository: Path, **kwargs: Any) -> TritonServer:
        kwargs.setdefault("log_file", tmp_path / f"triton-{len(servers)}.log")
        server = new_server(model_repository, **kwargs)
        servers.append(server)
        return server

    yield make
    stop_all(servers)


@pytest.fixture(scope="session")
def start_triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., TritonServer]]:
    """``start_triton(model_repository, **kwargs) -> TritonServer``: a server on free loopback ports, ready.

    ``kwargs`` go to ``TritonServer``; the log is kept in pytest's temporary directory. Every server
    is stopped at the end of the session; a module-scoped fixture may ``stop()`` its server earlier.
    """
    servers: list[TritonServer] = []

    def start_once(model_repository: Path, **kwargs: Any) -> TritonServer:
        kwargs.setdefault("log_file", tmp_path_factory.mktemp("triton-log") / "server.log")
        server = new_server(model_repository, **kwargs)
        servers.append(server)
        server.start()
        return server

    def start(model_repository: Path, **kwargs: Any) -> TritonServer:
        """Started once more after a failed start: Triton's Python backend can abort while it starts the stubs
        of many instances at once on a loaded host (triton-inference-server/server#8882, open in 2.55); a real
        fault fails the second start too."""
        try:
            return start_once(model_repository, **kwargs)
        except TritonServerError as err:
            print(f"\ntritonserver did not start ({err}); starting it once more", file=sys.stderr)
            return start_once(model_repository, **kwargs)

    yield start
    stop_all(servers)


def stop_all(servers: list[TritonServer]) -> None:
    """Stop ``servers`` side by side: each waits out its own unloading, so one after another would add up."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(1, len(servers))) as pool:
        list(pool.map(TritonServer.stop, servers))


@pytest.fixture(scope="session")
def lexicon_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pronunciation lexicon that the session's ``server`` reads (its TTS_LEXICON): absent until a test writes
    it; the server reads it again whenever it changes."""
    return tmp_path_factory.mktemp("lexicon") / "lexicon.tsv"


@pytest.fixture(scope="session")
def server(start_triton: Callable[..., TritonServer], model_repository: Path, lexicon_file: Path) -> TritonServer:
    """One server of the default model repository for the whole session, shared by the modules that only send it
    requests (a test that stops, kills or reconfigures a server starts its own with ``make_triton``); it reads
    ``lexicon_file`` as its pronunciation lexicon."""
    from tts_triton.text.lexicon import LEXICON_ENV

    saved = os.environ.get(LEXICON_ENV)
    os.environ[LEXICON_ENV] = str(lexicon_file)  # the server's environment is this process's at its start
    try:
        return start_triton(model_repository)
    finally:
        if saved is None:
            os.environ.pop(LEXICON_ENV)
        else:
            os.environ[LEXICON_ENV] = saved


@pytest.fixture(scope="session")
def gateway(server: TritonServer) -> Iterator[Any]:
    """A gateway (``tts-triton gateway``'s app, on a free port, in this process) in front of ``server``:
    a :class:`~tts_triton.gateway.server.BackgroundGateway`."""
    from tts_triton.gateway import GatewayConfig
    from tts_triton.gateway.server import BackgroundGateway
    from tts_triton.processes.triton_server import free_port

    with BackgroundGateway(GatewayConfig(triton_endpoints=(server.grpc_url,)), port=free_port()) as running:
        yield running


#: The folder of tests/ each test lives in is its tier, and its marker (pyproject.toml): ``unit`` starts no server
#: and neither builds nor runs a full-size network (the quick tier, run first); ``model`` trains, synthesizes with
#: full-size networks in process, or runs the teachers and the evaluation's judges; ``served`` starts real servers
#: (tritonserver, redis-server, the gateway) or builds the repository they serve; ``deploy`` builds the wheel,
#: renders the chart, runs the quickstart.
TESTS = Path(__file__).resolve().parent
TIERS = ("unit", "model", "served", "deploy")
#: Fixtures that start a server: a test using one, directly or through another fixture, is marked ``served``.
SERVED_FIXTURES = frozenset({"start_triton", "make_triton", "server", "gateway"})
#: Fixtures that make a test slow by the marker's definition (pyproject.toml): a real tritonserver, or the
#: exported model repository (an ONNX export of a full-size checkpoint). A test using one, directly or through
#: another fixture, is marked ``slow``, so that ``-m "not slow"`` leaves them out.
SLOW_FIXTURES = frozenset({"start_triton", "make_triton", "model_repository", "server"})


def tier_of(item: pytest.Item) -> str | None:
    """The tier folder ``item`` lives in (None outside them)."""
    parts = Path(item.path).resolve().relative_to(TESTS).parts
    return parts[0] if len(parts) > 1 and parts[0] in TIERS else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if tier := tier_of(item):
            item.add_marker(tier)
        if SERVED_FIXTURES & fixtures:
            item.add_marker(pytest.mark.served)
        if SLOW_FIXTURES & fixtures:
            item.add_marker(pytest.mark.slow)


# --- The unit tier's guard: a test under tests/unit that starts a server fails, naming what it started. ---

#: Programs that only the served tier may start (tritonserver: directly, or through ``tts-triton serve``).
SERVER_PROGRAMS = ("tritonserver", "redis-server")
#: Server commands this process launched since the last unit test began.
_SERVER_LAUNCHES: list[str] = []


def _is_server_command(argv: Any) -> bool:
    words = [os.fsdecode(a) for a in argv] if isinstance(argv, list | tuple) else os.fsdecode(argv).split()
    names = [os.path.basename(w) for w in words]
    serve = any(n in ("tts-triton", "tts_triton.cli") for n in names) and "serve" in words
    return serve or any(n in SERVER_PROGRAMS for n in names)


def _watch_launches(event: str, args: tuple[Any, ...]) -> None:
    """Audit hook: note every server command this process starts (``subprocess``, ``os.posix_spawn``, ``exec``)."""
    if event in ("subprocess.Popen", "os.posix_spawn", "os.exec") and args[1] is not None:
        with contextlib.suppress(TypeError, ValueError):
            if _is_server_command(args[1]):
                _SERVER_LAUNCHES.append(" ".join(map(os.fsdecode, args[1]))[:160])


sys.addaudithook(_watch_launches)


def _running_servers() -> set[str]:
    """This session's live server processes (:data:`SERVER_PROGRAMS`, started by this process or its children)."""
    found = set()
    for pid in _marked_processes():
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if os.path.basename(os.fsdecode(argv[0])) in SERVER_PROGRAMS:
                found.add(f"pid {pid}: {os.fsdecode(b' '.join(argv))[:160]}")
    return found


@pytest.fixture(autouse=True)
def unit_starts_no_server(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a unit-tier test that starts a server (the launch seen in this process, or a server of this session
    that was not running before the test)."""
    if tier_of(request.node) != "unit":
        yield
        return
    before = _running_servers()
    _SERVER_LAUNCHES.clear()
    yield
    started = [*_SERVER_LAUNCHES, *sorted(_running_servers() - before)]
    if started:
        pytest.fail("a unit test started a server (move it to tests/served): " + "; ".join(started[:3]))


#: The user's own cache folder of tts-triton, as it was before the session redirected $XDG_CACHE_HOME.
USER_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tts-triton"
#: Paths under USER_CACHE that this test process opened for writing, created or renamed into since the last test.
_USER_CACHE_WRITES: list[str] = []
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND


def _watch_user_cache(event: str, args: tuple[Any, ...]) -> None:
    """Audit hook: note every write of this process into USER_CACHE (other processes' writes are not ours)."""
    if event == "open":
        path, mode, flags = args
        if not (mode and any(c in mode for c in "wax+")) and not (mode is None and flags & _WRITE_FLAGS):
            return
    elif event in ("os.mkdir", "os.symlink"):
        path = args[0] if event == "os.mkdir" else args[1]
    elif event in ("os.rename", "os.replace", "shutil.copyfile", "shutil.copytree", "shutil.move"):
        path = args[1]
    else:
        return
    if isinstance(path, str | bytes | os.PathLike):
        name = os.path.abspath(os.fsdecode(path))
        if name == str(USER_CACHE) or name.startswith(f"{USER_CACHE}{os.sep}"):
            _USER_CACHE_WRITES.append(name)


sys.addaudithook(_watch_user_cache)


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``$XDG_CACHE_HOME`` for the whole session (and the commands and servers it starts): a temporary folder; and
    ``$TMPDIR`` another, so that what they leave in a temporary folder (torchrun's, a script's ``mktemp``) goes with
    pytest's own (pyproject.toml: removed after a run that passed, the last run's kept after a failure)."""
    import tempfile

    saved = {name: os.environ.get(name) for name in ("XDG_CACHE_HOME", "TMPDIR")}
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    os.environ["TMPDIR"] = str(tmp_path_factory.mktemp("tmp"))
    tempfile.tempdir = None  # found again from $TMPDIR
    yield Path(os.environ["XDG_CACHE_HOME"])
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    tempfile.tempdir = None


@pytest.fixture(autouse=True)
def user_cache_untouched(private_cache: Path) -> Iterator[None]:
    """Fail a test during which this process wrote anything under the user's tts-triton cache folder."""
    _USER_CACHE_WRITES.clear()
    yield
    if written := sorted(set(_USER_CACHE_WRITES)):
        _USER_CACHE_WRITES.clear()
        pytest.fail(f"the test wrote into the user's cache {USER_CACHE} (use tmp_path or $XDG_CACHE_HOME): "
                    + ", ".join(written[:5]) + (f" and {len(written) - 5} more" if len(written) > 5 else ""))


# --- The model under test: seeded weights with a calibrated stop gate, exported and served once. ---

SENTENCE_IDS = [1, *range(20, 52), 2]
CALIBRATION_STEPS = 48


@pytest.fixture(scope="session")
def test_style() -> Any:
    import numpy as np

    return np.random.default_rng(0).standard_normal(128).astype(np.float32) * 0.3


def calibrate_stop_gate(ckpt: Any, style: Any) -> Any:
    """``ckpt`` (seeded weights) with its stop gate calibrated to fire mid-sentence on SENTENCE_IDS for ``style``.

    Untrained gate logits barely move, so the stop rule would fire at step 0 or never. The gate's
    logits over the first steps are measured; the gate is flipped in sign if needed and biased so
    that the first crossing of 0 is the step that beats all earlier logits by the widest margin
    (``ckpt.info["test_stop_step"]``). Tests that compare implementations use it to exercise the
    stop rule.
    """
    import numpy as np
    import torch

    from tts_triton.core import contract

    stages = ckpt.stages()
    with torch.no_grad():
        phonemes = torch.tensor([SENTENCE_IDS], dtype=torch.int32)
        mask = torch.ones(phonemes.shape)
        (both,) = stages[contract.TEXT_ENCODER](phonemes, mask)
        memory, processed = both.split(contract.memory_parts(ckpt.config), dim=-1)
        decoder = stages[contract.DECODER].decoder
        _, gate, _, _ = decoder.run(decoder.initial_state(memory), CALIBRATION_STEPS, memory, processed, mask,
                                    torch.from_numpy(style)[None])
    logits = gate[0].numpy().astype(np.float64)
    best = max(((sign * logits[j] - max(sign * logits[:j]), sign, j) for sign in (1, -1)
                for j in range(3, CALIBRATION_STEPS)), key=lambda c: c[0])
    margin, sign, step = best
    assert margin > 0, "no step of the seeded decoder sets a new gate maximum"
    threshold = (max(sign * logits[:step]) + sign * logits[step]) / 2
    layer = ckpt.acoustic.decoder.gate
    with torch.no_grad():
        layer.weight.mul_(sign)
        layer.bias.mul_(sign).sub_(threshold)
    ckpt.info["test_stop_step"] = step
    return ckpt


@pytest.fixture(scope="session")
def checkpoint(test_style: Any) -> Any:
    """Seeded weights of the default size, stop gate calibrated (:func:`calibrate_stop_gate`)."""
    from tts_triton.models.checkpoint import init_checkpoint

    return calibrate_stop_gate(init_checkpoint(seed=7), test_style)


@pytest.fixture(scope="session")
def tiny_checkpoint(test_style: Any) -> Any:
    """Seeded weights of the TINY config, stop gate calibrated: for numerics checks that need no full-size model."""
    from tts_triton.models.checkpoint import init_checkpoint

    return calibrate_stop_gate(init_checkpoint(TINY, seed=7), test_style[: TINY.style.dim])


@contextlib.contextmanager
def built_once(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """The folder ``name`` that all xdist workers of this run share (the session's own without xdist), held under
    an exclusive lock while the caller fills it: the first worker builds, the others wait, then find it built."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's temporary root, above each worker's own
    folder = root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        folder.mkdir(exist_ok=True)
        yield folder


@pytest.fixture(scope="session")
def checkpoint_file(checkpoint: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    with built_once(tmp_path_factory, "ckpt") as folder:
        path = folder / "calibrated-seed7.pt"
        if not path.exists():
            checkpoint.save(path)
    return path


@pytest.fixture(scope="session")
def model_repository(checkpoint_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The full onnxruntime-python repository (networks, encode, tts, tts_offline) of ``checkpoint``; built once
    for all workers, served read-only."""
    from tts_triton.export.build import ensure_repository

    with built_once(tmp_path_factory, "repo") as root:
        return ensure_repository(root / "model_repository", checkpoint=checkpoint_file, cache=root / "cache",
                                 progress=False)


@pytest.fixture(scope="session")
def onnx_dir(model_repository: Path) -> Path:
    """The ONNX files the repository was built from."""
    return next(model_repository.parent.glob("cache/*/onnx"))


def stub_pid(server: TritonServer, model: str) -> int:
    """The Python backend stub of ``model``'s first instance (its command line names the instance)."""
    out = subprocess.run(["pgrep", "-f", f"{server.shm_prefix}.* {model}_0_0 "], capture_output=True, text=True)
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 1, f"stub of {model}: {out.stdout!r}"
    return pids[0]


@contextlib.contextmanager
def redis_asleep(redis: Any, seconds: float) -> Iterator[None]:
    """``redis`` (a :class:`~tts_triton.processes.local_redis.LocalRedis`) held in ``DEBUG SLEEP``, answering nothing
    for ``seconds``: entered once the sleep has begun (a PING on another connection goes unanswered for 0.2 s), not
    after a guessed delay; left once it is over."""
    import redis as redis_lib
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    sleeper = redis.client()
    sleeper.ping()  # connected already: the command goes out as soon as the thread runs
    probe = redis_lib.Redis(host="127.0.0.1", port=redis.port, password=redis.password, socket_timeout=0.2,
                            retry=Retry(NoBackoff(), 0))  # a PING that times out fails at once, is not retried
    probe.ping()
    thread = threading.Thread(target=sleeper.execute_command, args=("DEBUG", "SLEEP", str(seconds)))
    thread.start()
    try:
        deadline = time.monotonic() + seconds / 2
        with contextlib.suppress(redis_lib.TimeoutError):
            while time.monotonic() < deadline:
                probe.ping()
                time.sleep(0.01)
        assert time.monotonic() < deadline, "Redis never fell asleep"
        yield
    finally:
        thread.join()
        probe.close()
        sleeper.close()
