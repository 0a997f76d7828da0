"""Training workloads: declarative TOML files in profiles/, validated before anything starts."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recipes import train  # noqa: F401  (registers the modes and phase kinds)
from recipes.errors import ConfigError
from recipes.schema import Table, check_placeholders
from recipes.train.base import INSTANCE_MODES, PHASE_KINDS, Phase

#: placeholders every instance has
COMMON_PLACEHOLDERS = {"work", "workload_dir", "project"}


@dataclass(frozen=True)
class Instance:
    name: str
    mode: str
    options: Any
    env: dict[str, str]
    phases: tuple[Phase, ...]


@dataclass(frozen=True)
class Workload:
    path: Path
    description: str
    min_functions: int | None
    max_missing: int | None
    phase_timeout: float | None
    instances: tuple[Instance, ...]


def workload_path(project_dir: Path, name: str) -> Path:
    """A workload name (``demo-server``) is ``profiles/<name>.toml``; a path is itself."""
    if name.endswith(".toml") or "/" in name:
        path = Path(name)
        return path if path.is_absolute() else project_dir / path
    return project_dir / "profiles" / f"{name}.toml"


def load_workload(path: Path) -> Workload:
    if not path.is_file():
        known = sorted(p.stem for p in path.parent.glob("*.toml")) if path.parent.is_dir() else []
        raise ConfigError(
            f"no workload file {path}",
            f"set PGO_WORKLOAD to one of: {', '.join(known)}" if known else "write one: see profiles/README.md",
        )
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}", "fix the syntax") from exc
    top = Table(str(path), data)
    head = top.table("workload")
    if head is None:
        raise ConfigError(f"{path}: no [workload] table", "start the file with [workload] and a description")
    description = head.string("description", required=True)
    min_functions = head.integer("min_functions", minimum=0)
    max_missing = head.integer("max_missing", minimum=0)
    phase_timeout = head.number("phase_timeout")
    head.done()
    instances = []
    names: set[str] = set()
    for table in top.tables("instance", required=True):
        instance = _instance(table)
        if instance.name in names:
            raise ConfigError(
                f"{table.where}: name: {instance.name!r} is used twice", "give each instance its own name"
            )
        names.add(instance.name)
        instances.append(instance)
    top.done()
    return Workload(path, description, min_functions, max_missing, phase_timeout, tuple(instances))


def _instance(table: Table) -> Instance:
    name = table.string("name", required=True)
    if not name.replace("-", "").replace("_", "").isalnum():
        raise table.error(
            "name", f"{name!r} must be letters, digits, - and _", "it names the instance's .profraw files"
        )
    mode_name = table.string("mode", "command", choices=INSTANCE_MODES)
    mode = INSTANCE_MODES[mode_name]
    options = mode.parse(table)
    env = table.mapping("env")
    phases = []
    phase_names: set[str] = set()
    for phase_table in table.tables("phase", required=True):
        phase_name = phase_table.string("name", required=True)
        kind = phase_table.string("kind", required=True, choices=PHASE_KINDS)
        timeout = phase_table.number("timeout")
        phase_cls = PHASE_KINDS[kind]
        if mode_name not in phase_cls.modes:
            raise phase_table.error(
                "kind",
                f"a {kind!r} phase cannot run in a {mode_name!r} instance",
                f"use mode = {phase_cls.modes[0]!r} for it",
            )
        phase = phase_cls.parse(phase_table, phase_name, timeout)
        phase_table.done()
        if phase_name in phase_names:
            raise phase_table.error("name", f"{phase_name!r} is used twice in this instance")
        phase_names.add(phase_name)
        known = COMMON_PLACEHOLDERS | mode.placeholders()
        check_placeholders(phase_table.where, phase.texts(), known)
        phases.append(phase)
    table.done()
    check_placeholders(table.where, [*mode.texts(options), *env.values()], COMMON_PLACEHOLDERS | mode.placeholders())
    return Instance(name, mode_name, options, env, tuple(phases))
