"""What the benchmark does with the workload's scenarios (their format: :mod:`recipes.workload.scenario_format`): none
is refused, some are chosen (``--scenarios``), each is compared with the training (held out or trained)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from recipes.bench.meta import HeldOutJson
from recipes.errors import ConfigError
from recipes.workload import HOW_TO_ADD, Scenario, Workload


def require_scenarios(workload: Workload) -> tuple[Scenario, ...]:
    """The workload's scenarios; none is a one-line refusal saying how to add one."""
    if not workload.scenarios:
        raise ConfigError(f"{workload.path}: the workload declares no bench scenario", HOW_TO_ADD)
    return workload.scenarios


def select(names: str | None, scenarios: Sequence[Scenario]) -> list[Scenario]:
    """``a,b`` -> those scenarios in the order given; ``None`` or ``all`` -> every one."""
    if names is None or names.strip() in {"", "all"}:
        return list(scenarios)
    known = {s.name: s for s in scenarios}
    chosen = []
    for name in (n.strip() for n in names.split(",")):
        if not name:
            continue
        if name not in known:
            raise ConfigError(f"--scenarios: unknown scenario {name!r}", f"known: {', '.join(known)}")
        if known[name] not in chosen:
            chosen.append(known[name])
    if not chosen:
        raise ConfigError("--scenarios: no scenario named", f"known: {', '.join(known)}")
    return chosen


# ---------------------------------------------------------------------------------------------- held out


@dataclass(frozen=True)
class HeldOut:
    """Whether a scenario's requests (paths) or arguments also occur in the training."""

    trained: int  # of its paths (or its one argument list) this many occur in a training phase
    total: int
    rule: str = "paths"  # what decided: "paths" or "arguments" (compared with the training), or "declared"

    @property
    def status(self) -> str:
        if self.trained == 0:
            return "held-out"
        return "trained" if self.trained == self.total else "partly"

    def describe(self, unit: str) -> str:
        if self.status == "partly":
            return f"partly: {self.trained} of {self.total} {unit} in the training"
        return self.status

    def as_json(self) -> HeldOutJson:
        return {"status": self.status, "trained": self.trained, "total": self.total, "rule": self.rule}


def held_out(scenario: Scenario, workload: Workload) -> HeldOut:
    """Compare the scenario with every training phase: HTTP paths (of http and handshakes phases) as
    written, a command's arguments and standard input as a whole; a scenario's ``held_out = true|false`` decides
    instead (rule ``declared``)."""
    if scenario.declared_held_out is not None:
        total = 1 if scenario.kind == "command" else len(dict.fromkeys(scenario.paths))
        return HeldOut(0 if scenario.declared_held_out else total, total, "declared")
    phases = [phase for instance in workload.instances for phase in instance.phases]
    if scenario.kind == "command":
        runs = {(tuple(getattr(p, "args", ())), getattr(p, "stdin", None)) for p in phases if p.kind == "command"}
        return HeldOut(int((scenario.args, scenario.stdin) in runs), 1, "arguments")
    trained_paths = {p for phase in phases if phase.kind == "http" for p in getattr(phase, "paths", ())}
    trained_paths |= {getattr(phase, "path", "") for phase in phases if phase.kind == "handshakes"}
    distinct = list(dict.fromkeys(scenario.paths))
    return HeldOut(sum(1 for p in distinct if p in trained_paths), len(distinct))
