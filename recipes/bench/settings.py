"""What a bench run is given, and what it starts once for all its scenarios.

The builds to measure (the baseline first), the run's settings, the two cores (the server's and the load
generator's) and the open-files limit; the workload's ``[setup]`` resources (the upstream backend pinned to the
load core) and the environment an instance runs with.
"""

from __future__ import annotations

import os
import resource
import shutil
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from recipes.bench import canary, design, procstat
from recipes.bench.cpu_report import build_keys
from recipes.bench.meta import Meta
from recipes.errors import BenchError, ConfigError
from recipes.inputs import fill
from recipes.train.resources import UpstreamBackend
from recipes.workdir import BenchDir
from recipes.workload import Instance, Scenario, Workload
from recipes.workload.registry import DEFAULT_PHASE_TIMEOUT, RESOURCES, ResourceContext


@dataclass(frozen=True)
class Build:
    """One binary to measure, and what to call it in the table."""

    label: str
    binary: Path
    sha256: str = ""
    origin: str = ""  # where the binary was copied from
    c_compilers: str = ""  # what compiled its C and C++ (recipes.bench.builds.c_compilers_text); "": not known


@dataclass(frozen=True)
class Settings:
    builds: tuple[Build, ...]  # the baseline first, then each candidate
    scenarios: Sequence[Scenario]
    trials: int
    out: BenchDir  # <work>/bench
    server_core: int
    load_core: int
    workload: Workload
    project_dir: Path
    crate_dir: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)  # what the binaries and the setup start from
    scale: float = 1.0
    upstream_url: str | None = None  # an upstream of your own (or a dead one, to see a scenario refused)
    trial_timeout: float = 120.0
    command: str = ""
    #: PGO_PHASE_TIMEOUT: the limit of a workload's setup commands (else the workload's phase_timeout, or 300 s)
    phase_timeout: float | None = None

    @property
    def keyed(self) -> tuple[tuple[str, Build], ...]:
        return tuple(zip(build_keys(len(self.builds)), self.builds, strict=True))

    @property
    def rounds(self) -> list[tuple[int, list[tuple[str, Build]]]]:
        """The trials in rounds: (trial index from 1, the builds in the order they run that round), the order
        rotated each round (:func:`recipes.bench.design.rotated_orders`)."""
        return list(enumerate(design.rotated_orders(self.keyed, self.trials), 1))

    def meta(self) -> Meta:
        base, cand = self.builds[0], self.builds[1]
        return {
            "baseline": str(base.binary),
            "baseline_sha256": base.sha256,
            "baseline_label": base.label,
            "baseline_origin": base.origin,
            "candidate": str(cand.binary),
            "candidate_sha256": cand.sha256,
            "candidate_label": cand.label,
            "candidate_origin": cand.origin,
            "builds": [
                {
                    "key": key,
                    "label": b.label,
                    "binary": str(b.binary),
                    "sha256": b.sha256,
                    "origin": b.origin,
                    "c_compilers": b.c_compilers,
                }
                for key, b in self.keyed
            ],
            "workload": str(self.workload.path),
            "trials": self.trials,
            "design": {
                "name": design.DESIGN,
                "description": design.DESIGN_TEXT,
                "orders": [[key for key, _ in order] for _, order in self.rounds],
            },
            "scale": self.scale,
            "server_core": self.server_core,
            "load_core": self.load_core,
            "canary_iterations": canary.ITERATIONS,
            "command": self.command,
        }


def choose_cores(allowed: set[int], server: int | None = None, load: int | None = None) -> tuple[int, int]:
    """The server's core and the load generator's: two different ones of those this process may use.

    Default: the last allowed core for the server, the first for the load (core 0 takes more interrupts).
    """
    cores = sorted(allowed)
    if len(cores) < 2:
        raise BenchError(
            f"the benchmark needs two cores (server and load generator apart) and may use only {cores}",
            "run it on a machine (or a CPU set) with at least two cores",
        )
    server = cores[-1] if server is None else server
    load = next(c for c in cores if c != server) if load is None else load
    for name, core in (("--server-core", server), ("--load-core", load)):
        if core not in allowed:
            raise ConfigError(f"{name} {core}: not a core this process may use", f"one of {cores}")
    if server == load:
        raise ConfigError(f"--server-core and --load-core are both {server}", "give them two different cores")
    return server, load


def raise_open_files_limit() -> None:
    """1024 connections need more than the usual soft limit of 1024 descriptors (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 8192 if hard == resource.RLIM_INFINITY else min(hard, 8192)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


# ---------------------------------------------------------------------------------------------- setup


@dataclass
class Setup:
    """The workload's ``[setup]`` resources, started once for the whole run, and the placeholders they give."""

    values: dict[str, str]
    upstream_pid: int | None = None


@contextmanager
def started_setup(settings: Settings) -> Iterator[Setup]:
    """Start the workload's ``[setup]`` (the upstream backend pinned to the load core); ``--upstream`` replaces
    ``{upstream}``."""
    scratch = settings.out.setup
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    values = {
        "work": str(scratch),
        "workload_dir": str(settings.workload.path.parent),
        "project": str(settings.project_dir),
        "crate": str(settings.crate_dir or settings.project_dir),
    }
    setup = Setup(values)
    with ExitStack() as stack:
        for kind, options in settings.workload.resources:
            live = stack.enter_context(
                RESOURCES[kind].start(
                    options,
                    ResourceContext(
                        scratch,
                        settings.out.logs,
                        dict(settings.env),
                        dict(values),
                        timeout=settings.phase_timeout or settings.workload.phase_timeout or DEFAULT_PHASE_TIMEOUT,
                        verifying=True,
                    ),
                )
            )
            values.update(live.values)
            child = live.handle.child if isinstance(live.handle, UpstreamBackend) else None
            if child is not None:
                for thread in procstat.read_threads(child.pid):
                    os.sched_setaffinity(thread.pid, {settings.load_core})
                setup.upstream_pid = child.pid
        if settings.upstream_url is not None:
            values["upstream"] = settings.upstream_url
            setup.upstream_pid = None
        yield setup


class Place(NamedTuple):
    """Where a scenario's trials run: the scenario (scaled), the run's settings, its ``[setup]``, its folder."""

    scenario: Scenario
    settings: Settings
    setup: Setup
    workdir: Path


def instance_env(instance: Instance, base: Mapping[str, str], values: Mapping[str, str]) -> dict[str, str]:
    return {**base, **{k: fill(v, dict(values)) for k, v in instance.env.items()}}
