"""``mode = "server"`` instances: start the binary once, wait until it answers, run the phases, stop it.

    [[instance]]
    name = "log-ecdsa"
    mode = "server"
    args = ["--config", "{config}"]
    config = '''…TOML with {http_port}, {https_port}, {ecdsa_cert}, {upstream}, {instance_dir}…'''
    ready = "http://127.0.0.1:{http_port}/health"     # the default
    ready_timeout = 60                                 # seconds, the default
    stop_timeout = 60                                  # seconds after SIGTERM, the default
    exit_on_sigterm = false                            # true: SIGTERM calls exit(0) (see recipes/train/sigterm.py)

The server must exit with status 0 after SIGTERM (so an instrumented binary writes its profile); a signal,
another exit code, or an exit before the stop fails the training with the tail of the server's log. The server
runs in a session of its own; whatever it leaves running when it exits (a daemon, a worker, even one that called
``setsid``) is killed and reaped before the instance ends (``recipes.procs``). In the training that is a refusal:
an instrumented leftover could write its ``.profraw`` while the merge reads the profiles, or be killed in the middle
of writing it. Replaying (verify), it is one ``pgo: … left N processes running (…); killed them`` line.
"""

from __future__ import annotations

import shlex
import signal
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from recipes.errors import PgoError, TrainingFailed
from recipes.files import write_atomically
from recipes.inputs import Table, fill
from recipes.procs import Child, describe_exit
from recipes.runner import say, show
from recipes.train import sigterm
from recipes.train.command import LEFTOVER_HINT
from recipes.web import net
from recipes.workdir import WorkDir
from recipes.workload.registry import InstanceMode, PhaseContext, register_mode

PORT_PLACEHOLDERS = ("http_port", "https_port")
#: seconds between two lines while a server takes its time to exit after SIGTERM (under qemu it may take minutes)
STOP_PROGRESS_EVERY = 10.0


@dataclass(frozen=True)
class ServerOptions:
    args: list[str]
    config: str | None
    ready: str
    ready_timeout: float
    stop_timeout: float
    exit_on_sigterm: bool = False


@dataclass
class RunningServer:
    """The live server process of an instance, for the phases: is it still there, and what to show if not."""

    instance: str
    child: Child
    ports: dict[str, int]
    #: the instance's environment, which the dump's tools (ss) run with
    env: dict[str, str]
    tail_shown: bool = False

    def show_tail(self) -> None:
        """Print the tail of the server's log (once)."""
        if not self.tail_shown:
            self.tail_shown = True
            show(f"--- tail of the server log {self.child.log}:\n{self.child.tail()}")

    def dump(self, extra_ports: list[int] | None = None) -> str:
        ports = [*self.ports.values(), *(extra_ports or [])]
        return net.hang_dump(ports, self.child.pid if self.child.returncode is None else None, self.child.log, self.env)

    def died(self, what: str) -> TrainingFailed:
        """The error for a server that exited while ``what`` (its log's tail printed first)."""
        returncode = self.child.returncode
        if returncode is None:
            raise ValueError(f"instance {self.instance}: died() of a server that is still running")
        self.show_tail()
        last = self.child.tail(1, joined=" ")[:200]
        return TrainingFailed(
            f"instance {self.instance}: the server exited with {describe_exit(returncode)} {what}"
            + (f"; its log ends: {last}" if last else ""),
            f"see {self.child.log}",
        )


@register_mode
class ServerMode(InstanceMode[ServerOptions]):
    """A long-running server: started once per instance; its phases send it requests."""

    kind = "server"

    def parse(self, table: Table) -> ServerOptions:
        return ServerOptions(
            args=table.strings("args"),
            config=table.string("config"),
            ready=table.string("ready", "http://127.0.0.1:{http_port}/health"),
            ready_timeout=table.number("ready_timeout", 60.0),
            stop_timeout=table.number("stop_timeout", 60.0),
            exit_on_sigterm=bool(table.boolean("exit_on_sigterm", default=False)),
        )

    def placeholders(self) -> set[str]:
        return {*PORT_PLACEHOLDERS, "config", "instance_dir"}

    def texts(self, options: ServerOptions) -> list[str]:
        return [*options.args, options.ready, *([options.config] if options.config is not None else [])]

    def session(self, options: ServerOptions, ctx: PhaseContext) -> AbstractContextManager[PhaseContext]:
        return _serve(options, ctx)


@contextmanager
def _serve(options: ServerOptions, ctx: PhaseContext) -> Iterator[PhaseContext]:
    instance_dir = Path(ctx.values["work"]) / ctx.instance
    instance_dir.mkdir(parents=True, exist_ok=True)
    ports = dict(zip(PORT_PLACEHOLDERS, net.free_ports(len(PORT_PLACEHOLDERS)), strict=True))
    config_path = instance_dir / "config.toml"
    values = {
        **ctx.values,
        **{k: str(v) for k, v in ports.items()},
        "instance_dir": str(instance_dir),
        "config": str(config_path),
    }
    if options.config is not None:
        write_atomically(config_path, fill(options.config, values))
    argv = ctx.argv([fill(a, values) for a in options.args])
    log = ctx.logs / f"train-{ctx.instance}-server.log"
    say(f"instance {ctx.instance}: starting {' '.join(argv)} (log {log})")
    env = ctx.env
    if options.exit_on_sigterm:
        arch = sigterm.target_arch(ctx.binary, ctx.launcher)
        work = WorkDir(Path(ctx.values["work"]).parent)  # the phases' scratch is a folder of the work dir
        library = sigterm.shim(work.bin, env, arch)
        env = sigterm.preload_env(env, library, emulated=bool(ctx.launcher))
    with Child.start(argv, env=env, log=log, label=f"instance {ctx.instance}: the server") as child:
        child.hold_leftovers = not ctx.verifying  # in the training, a refusal (see _stop)
        server = RunningServer(ctx.instance, child, ports, ctx.env)
        ready_url = fill(options.ready, values)
        ready_limit = options.ready_timeout * ctx.slowdown
        readiness = child.wait_ready(ready_url, ready_limit)
        if not readiness.ready:
            if not child.alive():
                raise server.died(f"before it answered {ready_url}")
            raise not_ready(server, ready_url, ready_limit, readiness)
        say(f"instance {ctx.instance}: ready in {readiness.seconds:.2f} s (pid {child.pid}, ports {ports})")
        try:
            yield replace(ctx, values=values, server=server)
        except PgoError:
            server.show_tail()  # whatever failed, the server's side of it
            raise
        _stop(server, options, ctx)  # leaving the block kills it if it is still there


def not_ready(server: RunningServer, url: str, limit: float, readiness: net.Readiness) -> TrainingFailed:
    """The error for a server that is running but did not answer ``url`` with 200: what it answered instead
    (its sockets, threads and log are printed first)."""
    problem = readiness.problem(url, limit)
    if readiness.steady:
        server.show_tail()
        return TrainingFailed(
            f"instance {server.instance}: the server {problem}",
            "set ready = to a URL it answers with 200 when it is up (a health check path), "
            f"or fix the server's config; see {server.child.log}",
        )
    show(server.dump())
    answered = readiness.last is not None and readiness.last.status is not None
    return TrainingFailed(
        f"instance {server.instance}: the server {problem}",
        f"see {server.child.log}; raise ready_timeout if it starts slowly"
        + (", or set ready = to a URL it answers with 200" if answered else ""),
    )


def stop_timed_out(server: RunningServer, options: ServerOptions, ctx: PhaseContext, limit: float) -> TrainingFailed:
    """The error for a server still running ``limit`` seconds after SIGTERM (killed since); under emulation it
    says what differs there: the program that ran it, the stretched limit, what killing it lost, what to try."""
    what = f"instance {server.instance}: the server did not exit within {limit:.0f} s of SIGTERM"
    if not ctx.launcher:
        return TrainingFailed(what, "its threads are shown above; it must stop gracefully so its profile gets written")
    qemu = Path(ctx.launcher[0]).name
    lost = (
        "killing it lost this instance's .profraw, written only at exit, but the instrumented build is kept: "
        "nox -s train trains it again; "
        if not ctx.verifying
        else ""
    )
    prefix = ctx.env.get("QEMU_LD_PREFIX")
    by_hand = " ".join([*([f"QEMU_LD_PREFIX={prefix}"] if prefix else []), *map(shlex.quote, server.child.argv)])
    return TrainingFailed(
        f"{what} under {qemu} (stop_timeout {options.stop_timeout:g} s, {ctx.slowdown:g} times longer under emulation)",
        f"its threads are shown above, one per emulated thread; {lost}try it by hand: {by_hand}, then kill -TERM "
        "its pid; a server that drains its connections before it exits may take a shutdown timeout of its own in "
        f"args; on an {qemu.removeprefix('qemu-')} machine the same training runs without qemu",
    )


def _stop(server: RunningServer, options: ServerOptions, ctx: PhaseContext) -> None:
    """SIGTERM, then the exit status must be 0; a line every :data:`STOP_PROGRESS_EVERY` seconds while it runs."""
    limit = options.stop_timeout * ctx.slowdown
    child = server.child
    if not child.alive():
        raise server.died("before it was stopped")
    started = time.monotonic()
    waiting = f"instance {server.instance}: waiting for the server (pid {server.child.pid}) to exit after SIGTERM"
    returncode = child.stop(
        limit, progress=lambda waited: say(f"{waiting}: {waited:.0f} s of {limit:.0f} s"), every=STOP_PROGRESS_EVERY
    )
    if returncode is None:
        show(server.dump())
        child.kill()
        raise stop_timed_out(server, options, ctx, limit)
    if returncode != 0:
        server.show_tail()
        killed = returncode == -signal.SIGTERM
        raise TrainingFailed(
            f"instance {server.instance}: the server exited with {describe_exit(returncode)} after SIGTERM, "
            "expected exit code 0" + (": it has no SIGTERM handler, so it writes no profile" if killed else ""),
            "set exit_on_sigterm = true in the instance (SIGTERM then calls exit(0))"
            if killed
            else f"see {server.child.log}",
        )
    said = child.take_leftovers()
    if said is not None:
        raise TrainingFailed(f"instance {server.instance}: the server {said}", LEFTOVER_HINT)
    say(f"instance {server.instance}: stopped in {time.monotonic() - started:.2f} s (exit code 0)")
