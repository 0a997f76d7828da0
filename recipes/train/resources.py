"""The ``[setup]`` resources a workload's instances share: certificates, a document root, an upstream backend.

[setup]
certs = ["ecdsa", "rsa"]   # {ecdsa_cert} {ecdsa_key} {rsa_cert} {rsa_key}
docroot = true             # {docroot} (files served) and {bodies} (request bodies); or "site": your own folder
upstream = true            # {upstream} (http://127.0.0.1:PORT), {upstream_port}, {dead_port}
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recipes import certs, docroot, net
from recipes.errors import TrainingFailed
from recipes.procs import Child
from recipes.runner import log_tail, say
from recipes.schema import Table
from recipes.workload.registry import LiveResource, Resource, ResourceContext, register_resource

PROJECT = Path(__file__).resolve().parent.parent.parent


@register_resource
class Certs(Resource):
    kind = "certs"

    def parse(self, table: Table, key: str) -> Any:
        kinds = table.strings(key)
        for kind in kinds:
            if kind not in certs.KEY_TYPES:
                raise table.error(key, f"unknown key type {kind!r}", f"one of {', '.join(certs.KEY_TYPES)}")
        return kinds

    def placeholders(self, options: Any) -> set[str]:
        return {f"{kind}_{part}" for kind in options for part in ("cert", "key")}

    def start(self, options: Any, ctx: ResourceContext) -> AbstractContextManager[LiveResource]:
        @contextmanager
        def made() -> Iterator[LiveResource]:
            yield LiveResource(certs.make_certs(options, ctx.scratch / "certs", env=ctx.env, logs=ctx.logs))

        return made()


@dataclass(frozen=True)
class DocrootOptions:
    #: the user's own folder served as ``{docroot}`` (absolute), or None: the deterministic files
    folder: Path | None = None


def _docroot_options(options: Any) -> DocrootOptions:
    """The options :meth:`Docroot.parse` returned; anything else is a bug (a TypeError, not an assert that
    ``python -O`` drops)."""
    if not isinstance(options, DocrootOptions):
        raise TypeError(f"Docroot expects the DocrootOptions its parse returned, got {type(options).__name__}")
    return options


def _workload_dir(table: Table) -> Path:
    """The folder of the workload file whose ``[setup]`` table this is (its ``where`` is ``<path> [setup]``)."""
    return Path(table.where.rsplit(" [", 1)[0]).parent


@register_resource
class Docroot(Resource):
    """``docroot = true``: deterministic files (recipes/docroot.py); ``docroot = "site"``: the user's own folder
    (absolute, or relative to the workload file's folder; ``{workload_dir}`` may start it). ``{bodies}`` is made
    either way."""

    kind = "docroot"

    def parse(self, table: Table, key: str) -> Any:
        if isinstance(table.data.get(key), str):
            text: str = table.string(key)
            path_text = (
                text.replace("{workload_dir}", str(_workload_dir(table)), 1)
                if text.startswith("{workload_dir}")
                else text
            )
            if "{" in path_text or "}" in path_text or not path_text:
                raise table.error(
                    key,
                    f"{text!r} is not a folder path",
                    "a path, absolute or relative to the workload file's folder (only {workload_dir} may start it)",
                )
            folder = Path(path_text).expanduser()
            folder = (folder if folder.is_absolute() else _workload_dir(table) / folder).resolve()
            if not folder.is_dir():
                raise table.error(
                    key, f"no folder {folder}", "create it with the files to serve, or set docroot = true"
                )
            return DocrootOptions(folder)
        value = table.data.get(key)
        if not isinstance(value, bool) or table.boolean(key) is not True:
            raise table.error(
                key, f"must be true (or left out), or the path of a folder of your own files; got {value!r}"
            )
        return DocrootOptions()

    def placeholders(self, options: Any) -> set[str]:  # noqa: ARG002  (the Resource interface)
        return {"docroot", "bodies"}

    def files(self, options: Any) -> set[str]:
        options = _docroot_options(options)
        made = {f"{{bodies}}/{name}" for name in docroot.BODY_FILES}
        if options.folder is None:
            made |= {f"{{docroot}}/{name}" for name in docroot.DOCROOT_FILES}
        return made

    def start(self, options: Any, ctx: ResourceContext) -> AbstractContextManager[LiveResource]:
        options = _docroot_options(options)

        @contextmanager
        def made() -> Iterator[LiveResource]:
            if options.folder is not None and not options.folder.is_dir():
                raise TrainingFailed(
                    f"[setup] docroot: the folder {options.folder} is gone", "create it again, or set docroot = true"
                )
            yield LiveResource(docroot.make_docroot(ctx.scratch, options.folder))

        return made()


class UpstreamBackend:
    """The Python upstream (recipes/upstream.py) in its own process, on a fixed port, restartable."""

    def __init__(self, port: int, log: Path, env: dict[str, str]) -> None:
        self.port = port
        self.log = log
        self.env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT), env.get("PYTHONPATH")]))}
        self.child: Child | None = None

    def start(self, limit: float = 30.0) -> None:
        offset = self.log.stat().st_size if self.log.exists() else 0
        argv = [sys.executable, "-m", "recipes.upstream", "--port", str(self.port)]
        self.child = child = Child.start(
            argv, env=self.env, log=self.log, cwd=PROJECT, append=True, label="the upstream backend"
        )
        said = f"listening {self.port}".encode()

        def listening() -> bool:
            with self.log.open("rb") as text:
                text.seek(offset)
                return said in text.read()

        if child.wait_for(listening, limit):
            return
        code = child.returncode
        self.stop()
        if code is not None:
            raise TrainingFailed(
                f"the upstream backend exited with code {code} at start",
                f"see {self.log}: {log_tail(self.log, 3)}",
            )
        raise TrainingFailed(
            f"the upstream backend did not listen on port {self.port} in {limit:.0f} s", f"see {self.log}"
        )

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop_or_kill(10)
        self.child = None

    @contextmanager
    def down(self) -> Iterator[None]:
        """The backend stopped for a while (its port refuses connections), then started again. A phase that fails
        leaves it stopped: the workload ends there, and a failed restart must not replace the phase's error."""
        say(f"upstream backend on port {self.port}: stopped for this phase")
        self.stop()
        yield
        self.start()
        say(f"upstream backend on port {self.port}: running again")


@register_resource
class Upstream(Resource):
    kind = "upstream"

    def parse(self, table: Table, key: str) -> Any:
        if table.boolean(key) is not True:
            raise table.error(key, "must be true (or left out)")
        return True

    def placeholders(self, options: Any) -> set[str]:  # noqa: ARG002  (the Resource interface)
        return {"upstream", "upstream_port", "dead_port"}

    def start(self, options: Any, ctx: ResourceContext) -> AbstractContextManager[LiveResource]:  # noqa: ARG002
        @contextmanager
        def running() -> Iterator[LiveResource]:
            # a port bound but never listening: connections to it are refused, and nobody else gets it
            dead = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            dead.bind((net.HOST, 0))
            (port,) = net.free_ports(1)
            backend = UpstreamBackend(port, ctx.logs / "upstream.log", ctx.env)
            try:
                backend.start()
                say(f"upstream backend: http://{net.HOST}:{port} (log {backend.log})")
                values = {
                    "upstream": f"http://{net.HOST}:{port}",
                    "upstream_port": str(port),
                    "dead_port": str(dead.getsockname()[1]),
                }
                yield LiveResource(values, backend)
            finally:
                backend.stop()
                dead.close()

        return running()
