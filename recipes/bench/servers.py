"""The bench's servers: one build started from a scenario's instance (its args and config template, pinned to
the server's core by ``taskset``, every thread checked), waited for until ready, and stopped (SIGTERM)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from recipes.bench import procstat
from recipes.bench.settings import Build, Place, instance_env
from recipes.errors import BenchError
from recipes.inputs import fill
from recipes.procs import Child, describe_exit
from recipes.runner import log_tail, quote, say
from recipes.train import sigterm
from recipes.web import net

STOP_TIMEOUT = 15.0


@dataclass
class Server:
    """One running build of the server, pinned to its core."""

    build: Build
    child: Child
    http_port: int
    https_port: int
    log: Path
    instance_dir: Path

    @property
    def pid(self) -> int:
        return self.child.pid

    def base_url(self, *, tls: bool) -> str:
        return f"https://127.0.0.1:{self.https_port}" if tls else f"http://127.0.0.1:{self.http_port}"

    def alive(self) -> bool:
        return self.child.alive()


def start_server(
    build: Build,
    at: Place,
    *,
    core: int | None,
    name: str,
    env: Mapping[str, str] | None = None,
    wrapper: Sequence[str] = (),
    ready_timeout: float | None = None,
) -> Server:
    """Start ``build`` as the scenario's instance says (on ``core``, or unpinned; with ``env``, the run's unless
    given), under ``wrapper`` (valgrind, for the counts) if given; wait until it is ready (``ready_timeout``: the
    instance's unless given). Its files go in the scenario's folder, the SIGTERM shim (``exit_on_sigterm``) is
    built under the bench's."""
    scenario, settings, setup, workdir = at
    options = scenario.instance.options
    http_port, https_port = net.free_ports(2)
    instance_dir = workdir / name
    instance_dir.mkdir(parents=True, exist_ok=True)
    config = workdir / f"{name}.toml"
    filled = {
        **setup.values,
        "http_port": str(http_port),
        "https_port": str(https_port),
        "instance_dir": str(instance_dir),
        "config": str(config),
    }
    if options.config is not None:
        config.write_text(fill(options.config, filled), encoding="utf-8")
    log = workdir / f"{name}.log"
    pin = ["taskset", "-c", str(core)] if core is not None else []
    argv = [*pin, *wrapper, str(build.binary), *(fill(a, filled) for a in options.args)]
    server_env = instance_env(scenario.instance, settings.env if env is None else env, filled)
    if options.exit_on_sigterm:
        server_env = sigterm.preload_env(server_env, sigterm.shim(settings.out.sigterm, server_env))
    say(f"  $ {quote(argv)}")
    child = Child.start(argv, env=server_env, log=log, label=f"bench: the {build.label} server")
    server = Server(build, child, http_port, https_port, log, instance_dir)
    ready = fill(options.ready, filled)
    limit = options.ready_timeout if ready_timeout is None else ready_timeout
    readiness = child.wait_ready(ready, limit)
    if not readiness.ready:
        died = not child.alive()
        code = stop_server(server)
        what = (
            f"exited with {describe_exit(code)} before it answered {ready}" if died else readiness.problem(ready, limit)
        )
        said = tail_line(log)
        raise BenchError(f"{build.label} ({build.binary}) {what}" + (f": {said}" if said else ""), f"see {log}")
    if core is not None:
        _check_pinned(server, core)
    return server


def tail_line(path: Path) -> str:
    """The last five lines of a server's log, on one line (for a message)."""
    return log_tail(path, 5, joined=" | ")


def _check_pinned(server: Server, core: int) -> None:
    affinities = procstat.thread_affinities(server.pid)
    stray = {tid: sorted(cpus) for tid, cpus in affinities.items() if cpus != {core}}
    if not affinities or stray:
        stop_server(server)
        raise BenchError(
            f"{server.build.label}: threads not pinned to core {core}: {stray or 'none found'}",
            "taskset must be the util-linux one",
        )


def stop_server(server: Server, limit: float = STOP_TIMEOUT) -> int:
    """SIGTERM, then the exit code (a kill after the timeout gives a negative one)."""
    return server.child.stop_or_kill(limit)
