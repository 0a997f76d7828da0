"""Run a workload's instances and phases against a binary; check every instance wrote a profile.

The runner sits above what it runs: the workload (:mod:`recipes.workload`: the file, the registry) is at the
bottom, the instance modes, phase kinds and resources (:mod:`recipes.train`) register into it, and this module
drives them; the stages and the bench call it.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from recipes import train  # noqa: F401  (registers the instance modes, phase kinds and resources it drives)
from recipes.errors import TrainingFailed
from recipes.inputs import is_file
from recipes.results import WorkloadRun
from recipes.runner import plural, say
from recipes.toolchain import emulation
from recipes.workload import Instance, Workload
from recipes.workload.registry import (
    DEFAULT_PHASE_TIMEOUT,
    INSTANCE_MODES,
    RESOURCES,
    PhaseContext,
    PhaseResult,
    ResourceContext,
)


def profraw_pattern(profraw_dir: Path, instance: str) -> str:
    """``LLVM_PROFILE_FILE``: one file per binary signature (%m) and process (%p)."""
    return str(profraw_dir / f"{instance}-%m-%p.profraw")


@dataclass(frozen=True)
class Collect:
    """What a run must leave, one file per instance at least: nothing (verifying an optimised binary), a
    ``.profraw`` (training an instrumented one: :meth:`profraw`) or a ``.fdata`` (a BOLT-instrumented one, which
    writes where its instrumentation says: :meth:`fdata`) in ``directory``."""

    kind: Literal["nothing", "profraw", "fdata"] = "nothing"
    directory: Path | None = None

    @classmethod
    def profraw(cls, directory: Path) -> Collect:
        return cls("profraw", directory)

    @classmethod
    def fdata(cls, directory: Path) -> Collect:
        return cls("fdata", directory)

    @property
    def verifying(self) -> bool:
        return self.kind == "nothing"

    def prepare(self) -> None:
        """The raw profiles' folder emptied (a training's); BOLT's is the caller's."""
        if self.kind == "profraw" and self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory.mkdir(parents=True)

    def env_for(self, env: dict[str, str], instance: str) -> dict[str, str]:
        """``env`` with ``LLVM_PROFILE_FILE`` the training's pattern, or without one."""
        env.pop("LLVM_PROFILE_FILE", None)
        if self.kind == "profraw" and self.directory is not None:
            env["LLVM_PROFILE_FILE"] = profraw_pattern(self.directory, instance)
        return env

    def before(self) -> set[Path]:
        """The ``.fdata`` already there (an instance must add one)."""
        return set(self.directory.glob("*.fdata")) if self.kind == "fdata" and self.directory is not None else set()

    def check(self, instance: str, before: set[Path]) -> None:
        """Refuse an instance that wrote no profile where one was expected."""
        if self.directory is None:
            return
        if self.kind == "profraw" and not any(self.directory.glob(f"{instance}-*.profraw")):
            raise TrainingFailed(
                f"instance {instance} wrote no .profraw into {self.directory}",
                "is the binary instrumented, and does it exit normally (not by a signal or abort)?",
            )
        if self.kind == "fdata" and not self.before() - before:
            raise TrainingFailed(
                f"instance {instance} of the BOLT-instrumented binary wrote no .fdata into {self.directory}",
                "BOLT's runtime writes the profile at a normal exit (not by a signal or abort)",
            )

    def count(self, kind: str) -> int | None:
        """How many files of ``kind`` the run left (None: not this run's kind)."""
        if self.kind != kind or self.directory is None:
            return None
        return len(list(self.directory.glob(f"*.{kind}")))


#: a run of the optimised binary: nothing to collect
VERIFY = Collect()


@dataclass(frozen=True)
class RunSettings:
    """Where and how a workload runs: ``base_env`` (the plan's), ``scratch`` (the folder the phases may use, made
    afresh), ``logs``, the project and the crate's package dir (``{project}``, ``{crate}``), the scale, a phase
    timeout that overrides the workload's, and ``launcher`` (qemu-user for another architecture:
    ``recipes.toolchain.emulation``), whose slowdown multiplies the workload's own time limits."""

    base_env: Mapping[str, str]
    scratch: Path
    logs: Path
    project_dir: Path
    crate_dir: Path | None = None
    scale: float = 1.0
    timeout: float | None = None
    launcher: tuple[str, ...] = ()

    def values(self, workload: Workload) -> dict[str, str]:
        """The placeholders every instance may use."""
        return {
            "work": str(self.scratch),
            "workload_dir": str(workload.path.parent),
            "project": str(self.project_dir),
            "crate": str(self.crate_dir or self.project_dir),  # the crate's package dir: its sources, a corpus
        }


#: the names of what a workload run writes in its logs folder: each phase's log, its status codes, the server's
PHASE_LOGS = "train-*"


def run_workload(workload: Workload, binary: Path, settings: RunSettings, collect: Collect = VERIFY) -> WorkloadRun:
    """Drive ``binary`` through the workload: its resources set up, then each instance and its phases; each
    instance must leave what ``collect`` asks for."""
    collect.prepare()
    shutil.rmtree(settings.scratch, ignore_errors=True)
    settings.scratch.mkdir(parents=True)
    settings.logs.mkdir(parents=True, exist_ok=True)
    # the phase logs an earlier run left: a failed phase's log would otherwise stand beside a successful re-run's,
    # of a phase the workload may not even have now
    for path in sorted(settings.logs.glob(PHASE_LOGS)):
        if path.is_file() and not path.is_symlink():
            path.unlink(missing_ok=True)
    results: list[PhaseResult] = []
    started = time.monotonic()
    with ExitStack() as setup:
        shared: dict[str, str] = {}
        handles: dict[str, object] = {}
        for kind, options in workload.resources:
            say(f"setup: {kind}")
            values = {**settings.values(workload), **shared}
            context = ResourceContext(
                settings.scratch / "setup",
                settings.logs,
                dict(settings.base_env),
                values,
                timeout=settings.timeout or workload.phase_timeout or DEFAULT_PHASE_TIMEOUT,
                verifying=collect.verifying,
                profiles=collect.directory,
            )
            live = setup.enter_context(RESOURCES[kind].start(options, context))
            shared.update(live.values)
            handles[kind] = live.handle
        for instance in workload.instances:
            values = {**settings.values(workload), **shared}
            # what its phases run with: the environment (the plan's, the instance's own, the profile's file), the
            # placeholders, the scale and the time limits
            env = dict(settings.base_env)
            env.update({k: v.format_map(values) for k, v in instance.env.items()})
            ctx = PhaseContext(
                binary=binary,
                instance=instance.name,
                env=collect.env_for(env, instance.name),
                values=values,
                logs=settings.logs,
                scale=settings.scale,
                timeout=settings.timeout or workload.phase_timeout or DEFAULT_PHASE_TIMEOUT,
                verifying=collect.verifying,
                resources=handles,
                timeout_override=settings.timeout,
                launcher=settings.launcher,
                slowdown=emulation.slowdown(settings.launcher),
            )
            before = collect.before()
            results += _run_instance(instance, ctx)
            collect.check(instance.name, before)
    return WorkloadRun(
        seconds=round(time.monotonic() - started, 3),
        requests=sum(r.requests for r in results),
        phases=[r.as_json() for r in results],
        scale=settings.scale,
        workload=workload.path,
        profraw_files=collect.count("profraw"),
        fdata_files=collect.count("fdata"),
    )


def _run_instance(instance: Instance, ctx: PhaseContext) -> list[PhaseResult]:
    """The phases of one instance, in its mode's session (a server started and stopped, or none)."""
    results = []
    say(f"instance {instance.name} ({instance.mode}): {plural(len(instance.phases), 'phase')}")
    with INSTANCE_MODES[instance.mode].session(instance.options, ctx) as live_ctx:
        for phase in instance.phases:
            _check_phase_files(phase.files(), live_ctx.values, f"{instance.name}/{phase.name}")
            result = phase.run(live_ctx)
            say(
                f"phase {instance.name}/{phase.name}: {result.done}/{result.requests} in "
                f"{result.seconds:.1f} s{status_words(result.status)}"
            )
            results.append(result)
    return results


def status_words(status: Mapping[str, int]) -> str:
    """A phase's status counts for its progress line, those not zero: `` (2xx: 500, 4xx: 3)``, a command's
    `` (3 runs exited as expected)`` (report.json's ``exit_ok``: not an exit status, a count); "" for none."""
    counted = [
        f"{plural(count, 'run')} exited as expected" if key == "exit_ok" else f"{key}: {count:,}"
        for key, count in status.items()
        if count
    ]
    return f" ({', '.join(counted)})" if counted else ""


def _check_phase_files(files: list[str], values: dict[str, str], label: str) -> None:
    for name in files:
        path = Path(name.format_map(values))
        if not is_file(path):
            raise TrainingFailed(f"phase {label}: no file {path}", "fix the path in the workload")
