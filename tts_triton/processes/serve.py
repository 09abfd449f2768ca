"""``tts-triton serve``: start the embedded Triton server on a built repository, supervise it, and on
SIGINT/SIGTERM/SIGHUP drain it (new requests refused, those in flight finished) before it stops."""

from __future__ import annotations

import argparse
import os
import signal

from tts_triton.cache.settings import env_from_arguments
from tts_triton.console import fail
from tts_triton.export.targets import AUTO, DEFAULT_TARGET, RUNTIME_TARGETS, resolve_target
from tts_triton.processes.embedded import EmbeddedServer, home_install, triton_home
from tts_triton.processes.model_control import refuse_new_requests, wait_idle
from tts_triton.processes.mps import default_mps
from tts_triton.processes.supervisor import Supervisor
from tts_triton.processes.triton_server import (
    PortInUseError,
    TritonServer,
    TritonServerError,
    check_ports,
    set_parent_death_signal,
)

__all__ = ["serve", "serve_target"]

#: Seconds a drained server gets to exit on SIGTERM before SIGKILL (nothing is in flight any more).
DRAINED_STOP_S = 3.0


def serve_target(args: argparse.Namespace) -> str:
    """The target ``serve`` serves, printed with the reason it was chosen; ``ValueError`` says why none fits.

    With ``--no-build`` the repository must exist and, unless ``--target auto``, be built for that target.
    A target whose models run PyTorch on CUDA needs a CUDA GPU and a CUDA build of PyTorch here.
    """
    from tts_triton.export.repository import read_manifest
    from tts_triton.export.targets import cuda_torch

    if args.no_build:
        built = (read_manifest(args.model_repository) or {}).get("target")
        if built is None:
            raise ValueError(f"{args.model_repository} is not a built model repository (drop --no-build to build it)")
        if args.target not in (AUTO, built):
            raise ValueError(f"{args.model_repository} is built for {built}, not {args.target} "
                             "(drop --no-build to rebuild it)")
        choice_name, reason = built, "as built (--no-build)"
    else:
        choice = resolve_target(args.target)
        choice_name, reason = choice.name, choice.reason
    detected = args.target == AUTO and not args.no_build  # resolve_target has asked torch already
    if RUNTIME_TARGETS[choice_name].cuda_torch and not detected:
        usable, found = cuda_torch()
        if not usable:
            raise ValueError(f"target {choice_name} runs PyTorch on CUDA, and here {found}; "
                             f"use --target {AUTO} or {DEFAULT_TARGET}")
    print(f"target: {choice_name} ({reason})", flush=True)
    return choice_name


def serve(args: argparse.Namespace, parent_at_start: int) -> int:
    """Run ``tts-triton serve`` with its parsed ``args`` until a signal, returning the exit status; the server's
    process group is gone when it returns. ``parent_at_start``: the parent's pid, taken before the command's
    imports (``--exit-with-parent`` without a pid watches it)."""
    if args.exit_with_parent is not None:
        parent = args.exit_with_parent or parent_at_start
        if os.getppid() != parent:  # re-parented: the parent died, or PID never was the parent
            if parent == parent_at_start or not _alive(parent):
                return fail(f"--exit-with-parent: the parent process {parent} has already exited")
            return fail(f"--exit-with-parent {parent}: not the parent of serve (only a parent can be watched)")
        set_parent_death_signal(signal.SIGTERM, parent)
    if args.checkpoint is not None and not args.checkpoint.is_file():
        return fail(f"--checkpoint {args.checkpoint}: no such file")
    try:
        server_env = env_from_arguments(args)  # the models read their settings from the environment
    except (ValueError, OSError) as err:
        return fail(f"cache: {err}")
    if args.lexicon is not None:
        from tts_triton.text.lexicon import LEXICON_ENV, Lexicon, LexiconError

        try:
            print(f"lexicon: {args.lexicon} ({len(Lexicon.load(args.lexicon))} entries)", flush=True)
        except LexiconError as err:
            return fail(str(err))
        server_env[LEXICON_ENV] = str(args.lexicon.absolute())

    try:  # $TRITON_HOME: a Triton bundle instead of the wheel's server (a GPU host's .venv sets it)
        install = home_install(triton_home())
    except TritonServerError as err:
        return fail(str(err))
    server = EmbeddedServer(args.model_repository.absolute(), host=args.host, http_port=args.http_port,
                            grpc_port=args.grpc_port, metrics_port=args.metrics_port, log_verbose=args.log_verbose,
                            admin_key=os.environ.get("TTS_TRITON_ADMIN_KEY"), install=install,
                            environment=server_env, warm_up=True)
    signals = _StopSignals(server)
    try:  # whatever the signals and wherever they land, serve exits only once the server's group is gone
        try:
            check_ports(args.host, server.ports)  # before building: a busy port fails in seconds
            try:
                target = serve_target(args)
            except ValueError as err:
                return fail(str(err))
            server.extra_args = (*RUNTIME_TARGETS[target].server_args, *server.extra_args)
            mps, why = default_mps(args.mps, RUNTIME_TARGETS[target].cuda_torch)
            if mps:
                server.use_mps()
            if mps or args.mps is not None:
                print(f"MPS: {'on' if mps else 'off'} ({why})", flush=True)
            if not args.no_build:
                from tts_triton.export.build import (
                    ensure_repository,  # heavy (torch): only once the ports are known free
                )

                ensure_repository(args.model_repository, checkpoint=args.checkpoint, target=target)
            signals.install()
            print(f"starting tritonserver on {args.host} (log: {server.log_file}) ...", flush=True)
            server.start(timeout=args.startup_timeout)
        except PortInUseError as err:
            return fail(f"{err}; stop it or choose free ports with --http-port/--grpc-port/--metrics-port")
        except TritonServerError as err:
            return fail(str(err))
        except KeyboardInterrupt:
            return 130
        try:
            print(f"ready: gRPC {server.grpc_url}  HTTP {server.http_url}  metrics {server.metrics_url}  "
                  "(Ctrl-C stops)", flush=True)
            if args.health_interval <= 0:
                code = server.wait()
                return fail(f"tritonserver exited with code {code}; see {server.log_file}") if code else 0
            Supervisor(server, interval=args.health_interval, start_timeout=args.startup_timeout).run()
            return 0
        except TritonServerError as err:  # a restart failed
            return fail(str(err))
        except KeyboardInterrupt:
            _drain(server, args.drain_grace, signals)
            return 0
    finally:
        server.stop()


class _StopSignals:
    """``serve``'s SIGINT/SIGTERM/SIGHUP handler (a script's ``cmd &`` starts it with SIGINT ignored). While
    ``interrupts`` > 0 a signal takes one and raises ``KeyboardInterrupt`` (stop starting, or drain; in a drain:
    stop now); any other SIGKILLs the server, so that no stop in progress is cut short (Ctrl-C in a terminal
    and the trap of the script that started serve send two signals at once)."""

    def __init__(self, server: TritonServer) -> None:
        self.server = server
        self.interrupts = 1

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self)

    def __call__(self, *_: object) -> None:
        if self.interrupts > 0:
            self.interrupts -= 1
            raise KeyboardInterrupt
        self.server.kill()


def _drain(server: TritonServer, grace: float, signals: _StopSignals) -> None:
    """Refuse new requests, let those in flight finish within ``grace`` seconds, then stop the server at once
    (idle open streams do not hold it up). A second Ctrl-C/SIGTERM stops it without waiting."""
    if grace <= 0 or not server.is_running():
        print("stopping ...", flush=True)
        return
    signals.interrupts = 1
    try:
        try:
            refuse_new_requests(server)
            print(f"draining: new requests refused, up to {grace:g} s for those in flight (again to stop now) ...",
                  flush=True)
            left = wait_idle(server, grace, log=lambda line: print(line, flush=True))
            print("stopping ..." if left == 0 else f"stopping with {left} request(s) in flight ...", flush=True)
        finally:
            signals.interrupts = 0  # a signal during the stop below kills the server rather than cut the stop short
    except TritonServerError as err:
        print(f"drain failed ({err}); stopping ...", flush=True)
    except KeyboardInterrupt:
        print("stopping now ...", flush=True)
    server.stop(timeout=DRAINED_STOP_S)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True
