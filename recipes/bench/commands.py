"""A command scenario's runs: its arguments, working directory and stdin filled, the binary run a fixed number
of times (each in its own process group, pinned to the server's core), their CPU time from ``wait4``: the one
process loop of both measures (the counts wrap each run in cachegrind through :class:`Runs`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from recipes import procs
from recipes.bench import canary
from recipes.bench.settings import Build, Place, instance_env
from recipes.errors import ConfigError
from recipes.inputs import fill, home_expanded, is_dir
from recipes.procs import describe_exit
from recipes.runner import say
from recipes.train.command import EnvironmentValues
from recipes.workload import Scenario


@dataclass(frozen=True)
class CommandRuns:
    """``count`` runs of a command: how many did what was expected, and their CPU time from ``wait4``."""

    done: int
    user: float
    system: float
    wall: float
    problem: str = ""


def command_parts(scenario: Scenario, values: Mapping[str, str], env: Mapping[str, str]) -> tuple[list[str], Path]:
    """The scenario's arguments and working directory, placeholders and ``{env:NAME}`` filled."""
    where = f"scenario {scenario.name}"
    known = {**values, "env": EnvironmentValues(env, where)}
    args = [fill(a, known) for a in scenario.args]
    cwd_text = scenario.cwd if scenario.cwd is not None else scenario.instance.options.cwd
    cwd = Path(values["project"]) if cwd_text is None else home_expanded(Path(fill(cwd_text, known)))
    if not cwd.is_absolute():
        cwd = Path(values["project"]) / cwd
    if not is_dir(cwd):
        raise ConfigError(f"{where}: cwd {cwd} is not a directory", "create it, or fix cwd in the workload")
    return args, cwd


class Runs:
    """What the process loop does around each run: here nothing, each run as it is (CPU time); the counts run
    each under cachegrind (:class:`recipes.bench.counting.Cachegrind`)."""

    under = ""  # said after a run's exit: " under valgrind"

    def argv(self, number: int, argv: list[str]) -> list[str]:  # noqa: ARG002  (the interface)
        """Run ``number``'s command line."""
        return argv

    def ended(self, number: int) -> None:
        """After run ``number``, however it ended (may refuse)."""

    def counted(self, number: int) -> None:
        """After run ``number`` exited as expected."""

    def limit(self, timeout: float) -> str:
        """The limit a run overran, in its problem."""
        return f"{timeout:g} s and was killed"

    def see(self, number: int, log: Path) -> Path:  # noqa: ARG002  (the interface)
        """The log a run's unexpected exit points to."""
        return log


def run_command(
    binary: Path,
    at: Place,
    count: int,
    *,
    core: int | None,
    env: Mapping[str, str],
    log: Path,
    stdin: Path | None,
    factor: float = 1.0,
    runs: Runs | None = None,
) -> CommandRuns:
    """``count`` runs of ``binary`` for the scenario (each in its own process group, on ``core``), within ``factor``
    times --trial-timeout, their CPU time added up; ``runs`` (CPU time's by default) says what each run's command
    line is and what is done after it."""
    scenario, timeout = at.scenario, at.settings.trial_timeout * factor
    hooks = runs if runs is not None else Runs()
    args, cwd = command_parts(scenario, at.setup.values, env)
    argv = [str(binary), *args]
    deadline = time.monotonic() + timeout
    user = system = 0.0
    done = 0
    problem = ""
    leftovers: list[procs.Leftover] = []
    start = time.perf_counter()
    with ExitStack() as stack:
        if core is not None:
            stack.enter_context(canary.pinned({core}))  # the children inherit the core
        out = stack.enter_context(log.open("wb"))
        for number in range(1, count + 1):
            run_argv = hooks.argv(number, argv)
            source = stack.enter_context(stdin.open("rb")) if stdin is not None else None
            proc, tag = procs.start_group(
                run_argv,
                env,
                cwd=cwd,
                stdin=source if source is not None else procs.DEVNULL,
                stdout=out,
                stderr=procs.STDOUT,
            )
            exited, returncode, usage, left = procs.reap_group(proc, tag, deadline)
            leftovers += left
            if source is not None:
                source.close()
            user += usage.ru_utime
            system += usage.ru_stime
            hooks.ended(number)
            if not exited:
                problem = f"run {number} of {count} did not finish within {hooks.limit(timeout)}"
                break
            if returncode != scenario.expect_exit:
                problem = (
                    f"run {number} of {count} exited with {describe_exit(returncode)}{hooks.under}, "
                    f"expected {scenario.expect_exit} (see {hooks.see(number, log)})"
                )
                break
            hooks.counted(number)
            done += 1
    if leftovers:
        say(f"scenario {scenario.name}: its runs {procs.leftovers_line(leftovers)}")
    return CommandRuns(done, user, system, time.perf_counter() - start, problem)


def build_runs(
    build: Build, count: int, log: Path, at: Place, stdin: Path | None, factor: float = 1.0, runs: Runs | None = None
) -> CommandRuns:
    """``count`` runs of a build as a bench trial (or warm-up) runs them: on the server's core, in the
    instance's environment, within ``factor`` times --trial-timeout, logged to ``log``."""
    scenario, settings, setup, _workdir = at
    env = instance_env(scenario.instance, settings.env, setup.values)
    return run_command(
        build.binary, at, count, core=settings.server_core, env=env, log=log, stdin=stdin, factor=factor, runs=runs
    )


def stdin_file(scenario: Scenario, values: Mapping[str, str], env: Mapping[str, str], workdir: Path) -> Path | None:
    """The scenario's ``stdin``, filled, in a file every run reads from the start."""
    if scenario.stdin is None:
        return None
    path = workdir / "stdin.txt"
    known = {**values, "env": EnvironmentValues(env, f"scenario {scenario.name}")}
    path.write_text(fill(scenario.stdin, known), encoding="utf-8")
    return path
