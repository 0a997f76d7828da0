"""The ``[setup]`` resources a workload's instances share: certificates, a document root, an upstream backend.

[setup]
certs = ["ecdsa", "rsa"]   # {ecdsa_cert} {ecdsa_key} {rsa_cert} {rsa_key}
docroot = true             # {docroot} (files served) and {bodies} (request bodies); or "site": your own folder
upstream = true            # {upstream} (http://127.0.0.1:PORT), {upstream_port}, {dead_port}

[[setup.command]]          # a command (not the trained binary) run once before the instances: makes their input
name = "corpus"
args = ["python3", "{workload_dir}/make_corpus.py", "{corpus}"]
output = "corpus"          # {corpus}: a folder made empty under the run's scratch dir before the command runs
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import string
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recipes import procs
from recipes.errors import PgoError, TrainingFailed
from recipes.inputs import Table, fill, home_expanded, is_dir
from recipes.procs import Child
from recipes.runner import log_tail, say
from recipes.web import certs, docroot, net
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

    def offers(self) -> dict[str, str]:
        return {f"{kind}_{part}": f'certs = ["{kind}"]' for kind in certs.KEY_TYPES for part in ("cert", "key")}

    def start(self, options: Any, ctx: ResourceContext) -> AbstractContextManager[LiveResource]:
        return nullcontext(LiveResource(certs.make_certs(options, ctx.scratch / "certs", env=ctx.env, logs=ctx.logs)))


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
    """``docroot = true``: deterministic files (recipes/web/docroot.py); ``docroot = "site"``: the user's own folder
    (absolute, or relative to the workload file's folder; ``{workload_dir}`` may start it). ``{bodies}`` is made
    either way."""

    kind = "docroot"

    def parse(self, table: Table, key: str) -> Any:
        value = table.data.get(key)
        if isinstance(value, str):
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
            folder = home_expanded(Path(path_text))
            folder = (folder if folder.is_absolute() else _workload_dir(table) / folder).resolve()
            if not is_dir(folder):
                raise table.error(
                    key, f"no folder {folder}", "create it with the files to serve, or set docroot = true"
                )
            return DocrootOptions(folder)
        if not isinstance(value, bool) or table.boolean(key) is not True:
            raise table.error(
                key, f"must be true (or left out), or the path of a folder of your own files; got {value!r}"
            )
        return DocrootOptions()

    def placeholders(self, options: Any) -> set[str]:  # noqa: ARG002  (the Resource interface)
        return {"docroot", "bodies"}

    def offers(self) -> dict[str, str]:
        return {"docroot": "docroot = true", "bodies": "docroot = true"}

    def files(self, options: Any) -> set[str]:
        options = _docroot_options(options)
        made = {f"{{bodies}}/{name}" for name in docroot.BODY_FILES}
        if options.folder is None:
            made |= {f"{{docroot}}/{name}" for name in docroot.DOCROOT_FILES}
        return made

    def start(self, options: Any, ctx: ResourceContext) -> AbstractContextManager[LiveResource]:
        options = _docroot_options(options)
        if options.folder is not None and not options.folder.is_dir():
            raise TrainingFailed(
                f"[setup] docroot: the folder {options.folder} is gone", "create it again, or set docroot = true"
            )
        return nullcontext(LiveResource(docroot.make_docroot(ctx.scratch, options.folder)))


class UpstreamBackend:
    """The Python upstream (recipes/web/upstream.py) in its own process, on a fixed port, restartable."""

    def __init__(self, port: int, log: Path, env: dict[str, str]) -> None:
        self.port = port
        self.log = log
        self.env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT), env.get("PYTHONPATH")]))}
        self.child: Child | None = None

    def start(self, limit: float = 30.0) -> None:
        offset = self.log.stat().st_size if self.log.exists() else 0
        argv = [sys.executable, "-m", "recipes.web.upstream", "--port", str(self.port)]
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

    def offers(self) -> dict[str, str]:
        return dict.fromkeys(("upstream", "upstream_port", "dead_port"), "upstream = true")

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


#: a setup command's ``output``: the name of its placeholder
PLACEHOLDER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class SetupCommand:
    """One ``[[setup.command]]``: what runs (``args``, the program first), where (``cwd``: relative to the project;
    default the project) and with what on top of the training's environment (``env``); ``output``: the name of the
    folder placeholder it fills."""

    name: str
    args: tuple[str, ...]
    cwd: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    output: str | None = None

    def texts(self) -> list[str]:
        return [*self.args, *(v for _, v in self.env), *([self.cwd] if self.cwd is not None else [])]


def _setup_commands(options: Any) -> tuple[SetupCommand, ...]:
    """The options :meth:`Command.parse` returned; anything else is a bug."""
    if not isinstance(options, tuple) or not all(isinstance(c, SetupCommand) for c in options):
        raise TypeError(f"Command expects the SetupCommands its parse returned, got {type(options).__name__}")
    return options


def _parse_setup_command(table: Table, earlier: list[SetupCommand], later_outputs: set[str]) -> SetupCommand:
    """One ``[[setup.command]]`` table, checked against the commands before it and the outputs of those after it."""
    name = table.named("setup command")
    if any(c.name == name for c in earlier):
        raise table.error("name", f"{name!r} is used twice", "give each command its own name")
    args = table.strings("args", required=True)
    if not args or not args[0]:
        raise table.error("args", "needs the program to run first", 'for example args = ["python3", "make.py"]')
    output = table.string("output")
    if output is not None and not PLACEHOLDER_NAME.fullmatch(output):
        raise table.error("output", f"{output!r} is not a placeholder name", "letters, digits and _ (ASCII)")
    if output is not None and any(c.output == output for c in earlier):
        raise table.error("output", f"{output!r} is used twice", "one folder per command")
    command = SetupCommand(name, tuple(args), table.string("cwd"), tuple(table.environment("env").items()), output)
    table.done()
    for text in command.texts():
        try:
            fields = {f for _, f, _, _ in string.Formatter().parse(text) if f}
        except ValueError:
            continue  # a lone brace: the workload's check of every text says it
        early = sorted(fields & later_outputs)
        if early:
            raise table.error(
                "args", f"{{{early[0]}}} is the output of a later setup command", "order the commands as they run"
            )
    return command


@register_resource
class Command(Resource):
    """``[[setup.command]]``: a command run once, before the first instance, with the training's environment but its
    own ``LLVM_PROFILE_FILE`` (a folder nothing merges): it never runs the trained binary, and should it run an
    instrumented program, nothing it does enters the profile. It
    fails the training in one line naming it and its log (``<logs>/setup-<name>.log``)."""

    kind = "command"

    def parse(self, table: Table, key: str) -> Any:
        tables = table.tables(key, required=True)
        outputs = [t.data.get("output") for t in tables]
        commands: list[SetupCommand] = []
        for index, command_table in enumerate(tables):
            later = {o for o in outputs[index + 1 :] if isinstance(o, str)}
            commands.append(_parse_setup_command(command_table, commands, later))
        return tuple(commands)

    def placeholders(self, options: Any) -> set[str]:
        return {c.output for c in _setup_commands(options) if c.output is not None}

    def texts(self, options: Any) -> list[str]:
        return [text for c in _setup_commands(options) for text in c.texts()]

    def start(self, options: Any, ctx: ResourceContext) -> AbstractContextManager[LiveResource]:
        values = dict(ctx.values)
        made: dict[str, str] = {}
        for command in _setup_commands(options):
            if command.output is not None:
                folder = ctx.scratch / "outputs" / command.output
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir(parents=True)
                values[command.output] = made[command.output] = str(folder)
            _run_setup_command(command, values, ctx)
        return nullcontext(LiveResource(made))


def _run_setup_command(command: SetupCommand, values: dict[str, str], ctx: ResourceContext) -> None:
    """Run one setup command; a failure is one line naming it and its log."""
    env = {k: v for k, v in ctx.env.items() if k != "LLVM_PROFILE_FILE"}
    env.update({k: fill(v, values) for k, v in command.env})
    # an instrumented program it runs (the trained binary itself, a tool built with profile flags) would write into
    # the folder its -Cprofile-generate names, the training's: its profiles go where nothing merges them
    env["LLVM_PROFILE_FILE"] = str(ctx.scratch / "setup-profraw" / f"{command.name}-%m-%p.profraw")
    project = Path(values.get("project", "."))
    cwd = project / home_expanded(Path(fill(command.cwd, values))) if command.cwd is not None else project
    log = ctx.logs / f"setup-{command.name}.log"
    label = f"[setup] command {command.name!r}"
    if not is_dir(cwd):
        raise TrainingFailed(f"{label}: cwd {cwd} is not a directory", "create it, or fix cwd in the workload")
    started = time.monotonic()
    before = _entries(ctx.profiles)
    try:
        ran = procs.run_limited(
            [fill(a, values) for a in command.args], env=env, log=log, cwd=cwd, limit=ctx.timeout, label=label
        )
    except PgoError as exc:
        raise TrainingFailed(f"{label}: {exc.message}", exc.hint) from exc
    _check_setup_run(label, ran, log, ctx)
    _refuse_written_profiles(label, ctx.profiles, before)
    say(f"setup: command {command.name} done in {time.monotonic() - started:.1f} s")


#: why a setup command may leave nothing running (it is killed, and refused in the training)
SETUP_LEFTOVER_HINT = (
    "a setup command runs to its end before any instance starts, and what it leaves running is killed (it could "
    "write into the training's folders): make it wait for what it starts; a backend the phases need is [setup] "
    "upstream, or an instance of its own"
)


def _check_setup_run(label: str, ran: procs.Ran, log: Path, ctx: ResourceContext) -> None:
    """A setup command out of time, one that left processes running (refused in a training, said in a replay) or
    that exited non-zero: one line each."""
    if ran.returncode is None:
        raise TrainingFailed(
            f"{label} did not finish within {ctx.timeout:g} s (killed, with every process it started)",
            f"see {log}; raise the workload's phase_timeout (or PGO_PHASE_TIMEOUT), or make the command faster",
        )
    if ran.leftovers and not ctx.verifying:
        raise TrainingFailed(f"{label} {procs.leftovers_line(ran.leftovers)}", SETUP_LEFTOVER_HINT)
    if ran.leftovers:
        say(f"{label} {procs.leftovers_line(ran.leftovers)}")
    if ran.returncode != 0:
        last = log_tail(log, 1, joined="")
        raise TrainingFailed(
            f"{label} failed with exit code {ran.returncode}{f': {last[:200]}' if last else ''}",
            f"see {log}; the workload's [setup] runs it before any instance starts",
        )


def _entries(folder: Path | None) -> set[str]:
    """The names in ``folder`` (none when there is no folder, or it cannot be listed)."""
    try:
        return {entry.name for entry in folder.iterdir()} if folder is not None else set()
    except OSError:
        return set()


def _refuse_written_profiles(label: str, folder: Path | None, before: set[str]) -> None:
    """Refuse what a setup command put in the folder of the training's profiles: whatever is there after the
    training is recorded and merged as the training's (a file it wrote into profraw/ was, before)."""
    if folder is None or not (added := sorted(_entries(folder) - before)):
        return
    more = f" ({len(added)} such entries)" if len(added) > 1 else ""
    raise TrainingFailed(
        f"{label} wrote {folder / added[0]}{more} into the folder of the training's profiles, where only the "
        "instances' runs may write (what is there is merged as the training's)",
        "have it write into its output folder or under {work}, and remove what it wrote there",
    )
