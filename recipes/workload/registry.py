"""The phase model of training workloads.

A workload has instances; an instance has a *mode* (how the binary lives: run once per command, or a
server started once and stopped at the end) and a list of *phases* (what is done to it). Modes and phase
kinds are registered by name: a new phase kind is one new module with a ``@register_phase`` class.

This is the registry and the interfaces only: the modes, phase kinds and resources themselves live above, in
:mod:`recipes.train`, whose import registers them (a workload file naming them loads only once they are).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from recipes.inputs import Table
from recipes.results import PhaseRecord

#: a phase's time limit, and a setup command's, when neither PGO_PHASE_TIMEOUT nor the workload sets one
DEFAULT_PHASE_TIMEOUT = 300.0


@dataclass
class PhaseResult:
    """What one phase did, for report.json and the summary."""

    name: str
    kind: str
    requests: int
    done: int
    seconds: float
    status: dict[str, int] = field(default_factory=dict)
    detail: str = ""

    def as_json(self) -> PhaseRecord:
        record: PhaseRecord = {
            "name": self.name,
            "kind": self.kind,
            "requests": self.requests,
            "done": self.done,
            "status": self.status,
            "seconds": round(self.seconds, 3),
        }
        if self.detail:
            record["detail"] = self.detail
        return record


@dataclass
class PhaseContext:
    """Everything a phase needs to run against one instance."""

    binary: Path
    instance: str
    env: dict[str, str]
    values: dict[str, str]
    logs: Path
    scale: float
    timeout: float
    verifying: bool
    server: Any = None  # the running server of a server-mode instance
    #: the live setup resources of the workload (``[setup]``), by kind
    resources: dict[str, Any] = field(default_factory=dict)
    #: PGO_PHASE_TIMEOUT: when set, the limit of every phase, its own ``timeout`` included
    timeout_override: float | None = None
    #: the working directory of the instance's processes (a command instance's ``cwd``; None: the project)
    cwd: Path | None = None
    #: what runs the binary: qemu-user for a target of another architecture (``recipes.toolchain.emulation``), else
    #: nothing
    launcher: tuple[str, ...] = ()
    #: the factor of the workload's own time limits (``recipes.toolchain.emulation.SLOWDOWN`` under emulation)
    slowdown: float = 1.0

    def scaled(self, count: int) -> int:
        """A request or run count times PGO_TRAIN_SCALE, never below 1."""
        return max(1, math.ceil(count * self.scale))

    def limit(self, phase_timeout: float | None) -> float:
        """A phase's time limit: PGO_PHASE_TIMEOUT, else its own ``timeout``, else the workload's or 300 s."""
        return self.timeout_override or (phase_timeout or self.timeout) * self.slowdown

    def argv(self, args: list[str]) -> list[str]:
        """The command line that runs the binary with ``args`` (under the launcher, if any)."""
        return [*self.launcher, str(self.binary), *args]


@dataclass(eq=False)
class Phase(ABC):
    """One step of an instance's training (its fields: those of its table, ``name`` and ``timeout`` first; an
    instance's phases are compared by identity)."""

    kind: ClassVar[str]
    #: the instance modes this phase kind can run under
    modes: ClassVar[tuple[str, ...]]
    #: placeholders this phase kind fills itself in its texts, beyond the instance's (``env``: ``{env:NAME}``)
    fills: ClassVar[frozenset[str]] = frozenset()

    name: str
    timeout: float | None

    @classmethod
    @abstractmethod
    def parse(cls, table: Table, name: str, timeout: float | None) -> Phase:
        """Build the phase from its ``[[instance.phase]]`` table (``name``, ``kind``, ``timeout`` already read)."""

    @abstractmethod
    def texts(self) -> list[str]:
        """Every string that may hold placeholders, to check them before anything starts."""

    def files(self) -> list[str]:
        """Paths (after placeholders) that must exist before anything starts."""
        return []

    def needs(self) -> set[str]:
        """The ``[setup]`` resources this phase uses directly (not only through placeholders)."""
        return set()

    def tools(self) -> dict[str, str]:
        """The programs this phase runs, each with the Debian package that has it (checked before any build)."""
        return {}

    @abstractmethod
    def run(self, ctx: PhaseContext) -> PhaseResult:
        """Run the phase; raise :class:`~recipes.errors.TrainingFailed` when it does not do what it should."""


#: an instance mode's options: what its ``parse`` returns and its ``texts`` and ``session`` are given back
OptionsT = TypeVar("OptionsT")


class InstanceMode(ABC, Generic[OptionsT]):
    """How an instance's binary lives during its phases."""

    kind: ClassVar[str]
    #: placeholders the mode fills itself in its own option texts (not in the instance's ``env``)
    fills: ClassVar[frozenset[str]] = frozenset()

    @abstractmethod
    def parse(self, table: Table) -> OptionsT:
        """Read the mode's own keys of the ``[[instance]]`` table; returns its options."""

    @abstractmethod
    def placeholders(self) -> set[str]:
        """The placeholder names this mode provides."""

    @abstractmethod
    def texts(self, options: OptionsT) -> list[str]:
        """The option strings that may hold placeholders."""

    @abstractmethod
    def session(self, options: OptionsT, ctx: PhaseContext) -> AbstractContextManager[PhaseContext]:
        """Start what the phases run against, yield their context, stop it (and check it stopped well)."""


class Resource(ABC):
    """Something the workload's instances share, set up once before the first and torn down after the last
    (certificates, a document root, an upstream backend): one key of the workload's ``[setup]`` table."""

    kind: ClassVar[str]

    @abstractmethod
    def parse(self, table: Table, key: str) -> Any:
        """Read the resource's value of ``[setup]`` (``table`` is that table); returns its options."""

    @abstractmethod
    def placeholders(self, options: Any) -> set[str]:
        """The placeholder names the resource provides."""

    def offers(self) -> dict[str, str]:
        """Every placeholder it can provide, with the ``[setup]`` line that makes it (``{"bodies": "docroot = true"}``):
        a workload using one without that line is told which line to add."""
        return {}

    def files(self, options: Any) -> set[str]:  # noqa: ARG002  (the interface: a resource may use its options)
        """The files it makes, with placeholders (``{bodies}/attack.txt``), so phases naming others are refused."""
        return set()

    def texts(self, options: Any) -> list[str]:  # noqa: ARG002  (the interface: a resource may use its options)
        """Its strings that may hold placeholders (a setup command's arguments), checked when the workload loads
        against the common placeholders and those of the resources before it."""
        return []

    @abstractmethod
    def start(self, options: Any, ctx: ResourceContext) -> AbstractContextManager[LiveResource]:
        """Set the resource up, yield its placeholder values (and a handle phases may use), tear it down."""


@dataclass
class ResourceContext:
    """Where resources put their files and logs, and the environment their tools run with."""

    scratch: Path
    logs: Path
    env: dict[str, str]
    #: the placeholders known when it starts: the common ones and those of the resources started before it
    values: dict[str, str] = field(default_factory=dict)
    #: the seconds a setup command may take: PGO_PHASE_TIMEOUT, else the workload's phase_timeout, else 300 s
    timeout: float = DEFAULT_PHASE_TIMEOUT
    #: whether the run replays a built binary (verify, the bench): what a setup command leaves running is then
    #: said, not refused
    verifying: bool = False
    #: the folder where the training's processes write their profiles (raw profiles, BOLT's), which a setup
    #: command must leave as it was: what is there after the training is merged as the training's; None: none
    profiles: Path | None = None


@dataclass
class LiveResource:
    values: dict[str, str]
    handle: Any = None


PHASE_KINDS: dict[str, type[Phase]] = {}
INSTANCE_MODES: dict[str, InstanceMode[Any]] = {}
RESOURCES: dict[str, Resource] = {}

P = TypeVar("P", bound=type[Phase])


def register_phase(cls: P) -> P:
    PHASE_KINDS[cls.kind] = cls
    return cls


M = TypeVar("M", bound=type[InstanceMode[Any]])


def register_mode(cls: M) -> M:
    INSTANCE_MODES[cls.kind] = cls()
    return cls


R = TypeVar("R", bound=type[Resource])


def register_resource(cls: R) -> R:
    RESOURCES[cls.kind] = cls()
    return cls
