"""Training workloads: declarative TOML files in profiles/, loaded and validated before anything starts."""

from __future__ import annotations

import difflib
import math
import re
import shutil
import string
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from recipes.config import MAX_SECONDS, MIN_SECONDS
from recipes.errors import ConfigError, ToolchainError
from recipes.inputs import Table, home_expanded, is_file, parse_toml, read_text
from recipes.workload.model import Instance, Scenario, Workload
from recipes.workload.registry import INSTANCE_MODES, PHASE_KINDS, RESOURCES
from recipes.workload.scenario_format import HOW_TO_ADD, parse_scenario

#: placeholders every instance has
COMMON_PLACEHOLDERS = {"work", "workload_dir", "project", "crate"}
#: placeholders known when the workload is loaded (files under them are checked then)
STATIC_PLACEHOLDERS = {"workload_dir"}


#: this repository's own workloads: a name the project's own profiles/ lacks is looked up here
BUILTIN_PROFILES = Path(__file__).resolve().parents[2] / "profiles"


def workload_path(project_dir: Path, name: str) -> Path:
    """A workload name (``demo-server``) is the project's ``profiles/<name>.toml``, else pgo-recipes' own
    ``profiles/<name>.toml``; a path (``x.toml``, ``dir/x``) is itself, relative to the project."""
    if name.endswith(".toml") or "/" in name:
        path = home_expanded(Path(name))
        return path if path.is_absolute() else project_dir / path
    own = project_dir / "profiles" / f"{name}.toml"
    builtin = BUILTIN_PROFILES / f"{name}.toml"
    return builtin if not own.is_file() and builtin.is_file() else own


def known_workloads(near: Path) -> list[str]:
    """The workload names in ``near``'s folder and in pgo-recipes' own profiles/."""
    folders = {near.parent, BUILTIN_PROFILES}
    return sorted({p.stem for folder in folders if folder.is_dir() for p in folder.glob("*.toml")})


def no_workload_file(path: Path) -> ConfigError:
    """The refusal of a workload file that is not there, naming the workloads that are."""
    known = known_workloads(path)
    hint = f"set PGO_WORKLOAD to one of: {', '.join(known)}, or to a path" if known else "see profiles/README.md"
    return ConfigError(f"no workload file {path}", hint)


def load_workload(path: Path) -> Workload:
    """The workload file at ``path``, every key checked. The phase kinds, instance modes and resources it names
    are those registered (:mod:`recipes.train` registers them when imported)."""
    if not PHASE_KINDS:
        raise RuntimeError("no phase kind is registered: import recipes.train before loading a workload")
    if not path.is_file():
        raise no_workload_file(path)
    text = read_text(path, "the workload", ConfigError, "save it as UTF-8 text")
    data = parse_toml(text, str(path), ConfigError, "fix the syntax")
    top = Table(str(path), data)
    head = top.table("workload")
    if head is None:
        raise ConfigError(f"{path}: no [workload] table", "start the file with [workload] and a description")
    description = head.string("description", required=True)
    min_functions = head.integer("min_functions", minimum=0)
    min_functions_total = head.integer("min_functions_total", minimum=1)
    if min_functions_total is not None and min_functions is None:
        raise ConfigError(
            f"{path}: [workload] min_functions_total without min_functions",
            "it is the total min_functions was measured against: set both, or neither",
        )
    max_missing = head.integer("max_missing", minimum=0)
    phase_timeout = _timeout(head, "phase_timeout")
    head.done()
    resources, provided, known_files = _setup(top.table("setup"))
    instances: list[Instance] = []
    for table in top.tables("instance", required=True):
        earlier = {i.name: i for i in instances}
        instance = _instance(table, provided, earlier)
        for phase in instance.phases:
            missing = phase.needs() - {kind for kind, _ in resources}
            if missing:
                raise ConfigError(
                    f"{table.where}: phase {phase.name!r} needs [setup] {', '.join(sorted(missing))}",
                    f"add {sorted(missing)[0]} = … to the [setup] table",
                )
            _check_files(f"{table.where} phase {phase.name!r}", phase.files(), known_files, path.parent)
        if instance.name in earlier:
            raise ConfigError(
                f"{table.where}: name: {instance.name!r} is used twice", "give each instance its own name"
            )
        instances.append(instance)
    bench_instances, scenarios = _bench(top.table("bench"), provided, instances)
    top.done()
    return Workload(
        path,
        description,
        min_functions,
        max_missing,
        phase_timeout,
        tuple(instances),
        resources,
        min_functions_total,
        bench_instances,
        scenarios,
    )


def _bench(
    table: Table | None, provided: set[str], training: list[Instance]
) -> tuple[tuple[Instance, ...], tuple[Scenario, ...]]:
    """``[bench]``: its instances (as training ones, without phases) and its scenarios."""
    if table is None:
        return (), ()
    instance_tables, scenario_tables = table.tables("instance"), table.tables("scenario")
    table.done()
    instances: dict[str, Instance] = {}
    for instance_table in instance_tables:
        instance = _instance(instance_table, provided, {}, bench=True)
        if instance.name in instances or any(i.name == instance.name for i in training):
            raise ConfigError(
                f"{instance_table.where}: name: {instance.name!r} is used twice", "give each instance its own name"
            )
        instances[instance.name] = instance
    if not scenario_tables:
        raise table.error("scenario", "needs at least one [[bench.scenario]] table", HOW_TO_ADD)
    reachable = {**{i.name: i for i in training}, **instances}
    scenarios: list[Scenario] = []
    for scenario_table in scenario_tables:
        scenario = parse_scenario(scenario_table, reachable)
        scenario_table.done()
        if any(s.name == scenario.name for s in scenarios):
            raise scenario_table.error("name", f"{scenario.name!r} is used twice", "give each scenario its own name")
        mode = INSTANCE_MODES[scenario.instance.mode]
        known = COMMON_PLACEHOLDERS | provided | mode.placeholders() | mode.fills
        check_texts(scenario_table.where, scenario.texts(), known)
        scenarios.append(scenario)
    return tuple(instances.values()), tuple(scenarios)


def _setup(table: Table | None) -> tuple[tuple[tuple[str, Any], ...], set[str], set[str]]:
    """The ``[setup]`` resources, the placeholders they provide and the files they make."""
    if table is None:
        return (), set(), set()
    resources = []
    provided: set[str] = set()
    files: set[str] = set()
    for key in table.data:
        if key not in RESOURCES:
            close = difflib.get_close_matches(key, sorted(RESOURCES), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(sorted(RESOURCES))}"
            raise table.error(key, "unknown setup resource", hint)
        resource = RESOURCES[key]
        options = resource.parse(table, key)
        resources.append((key, options))
        own = resource.placeholders(options)
        clash = own & (COMMON_PLACEHOLDERS | provided)
        if clash:
            raise table.error(key, f"the placeholder {{{sorted(clash)[0]}}} is already given", "give it another name")
        check_texts(f"{table.where} {key}", resource.texts(options), COMMON_PLACEHOLDERS | provided | own)
        provided |= own
        files |= resource.files(options)
    table.done()
    return tuple(resources), provided, files


def _check_files(where: str, files: list[str], made: set[str], workload_dir: Path) -> None:
    """Refuse, before anything starts, a phase file that no resource makes and that does not exist."""
    for name in files:
        if name in made:
            continue
        fields = _fields(name)
        if fields - STATIC_PLACEHOLDERS:
            if fields & {field for made_name in made for field in _fields(made_name)}:
                known = ", ".join(sorted(made))
                raise ConfigError(f"{where}: no file {name} is made by [setup]", f"it makes: {known}")
            continue  # under {work} or {project}: checked when the phase starts
        path = Path(name.format_map({"workload_dir": str(workload_dir)}))
        if not is_file(path):
            raise ConfigError(f"{where}: no file {path}", "fix the path, or create the file")


def _fields(text: str) -> set[str]:
    return {f.split(".")[0] for _, f, _, _ in string.Formatter().parse(text) if f}


#: ``{env:NAME}``: a variable name
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
LITERAL_BRACES = "a literal brace is written {{ or }} (e.g. \\w{{3,}})"


def check_texts(where: str, texts: Iterable[str], known: Iterable[str]) -> None:
    """Refuse, before anything starts, a placeholder that is unknown or malformed, and a lone brace.

    A placeholder is a bare name (``{work}``); ``{env:NAME}`` only where ``env`` is known. No attribute, index,
    conversion or format spec: they would fail, or fill something else, only when the phase runs.
    """
    names = set(known)
    for text in texts:
        try:
            parsed = list(string.Formatter().parse(text))
        except ValueError as exc:
            raise ConfigError(f"{where}: a lone brace in {text!r} ({exc})", LITERAL_BRACES) from exc
        for _literal, field, spec, conversion in parsed:
            if field is None:
                continue
            written = "{" + field + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            if field == "env" and "env" in names:
                if conversion or not spec or not ENV_NAME.fullmatch(spec):
                    raise ConfigError(
                        f"{where}: {written} in {text!r} is not an environment placeholder",
                        "write {env:NAME} with NAME a variable name, such as {env:HOME}; " + LITERAL_BRACES,
                    )
                continue
            if field not in names:
                listed = sorted("env:NAME" if n == "env" else n for n in names)
                hint = f"known: {', '.join(listed)}; {LITERAL_BRACES}"
                if field == "env":
                    hint = "{env:NAME} is filled only in a command instance's cwd and its phases' args, stdin and cwd"
                line = _setup_line(field)
                if line is not None:
                    hint = f"{{{field}}} is made by [setup] {line}: add it to the workload's [setup] table; {hint}"
                raise ConfigError(f"{where}: unknown placeholder {written} in {text!r}", hint)
            if conversion or spec:
                raise ConfigError(
                    f"{where}: {written} in {text!r}: a placeholder takes no {'!' if conversion else ':'}",
                    f"write {{{field}}}; {LITERAL_BRACES}",
                )


def _setup_line(field: str) -> str | None:
    """The ``[setup]`` line that would provide the placeholder ``field`` (``docroot = true`` for ``bodies``), if any."""
    for resource in RESOURCES.values():
        line = resource.offers().get(field)
        if line is not None:
            return line
    return None


def _timeout(table: Table, key: str) -> float | None:
    value: float | None = table.number(key, finite=False)
    if value is not None and not (math.isfinite(value) and value <= MAX_SECONDS):
        raise table.error(key, f"{value} is not a number of seconds up to {MAX_SECONDS:g}", f"for example {key} = 300")
    if value is not None and 0 < value < MIN_SECONDS:  # 0 and below: the number's own refusal, "must be positive"
        raise table.error(key, f"{value:g} s is below the floor of {MIN_SECONDS:g} s", f"for example {key} = 300")
    return value


def _instance(table: Table, provided: set[str], earlier: dict[str, Instance], *, bench: bool = False) -> Instance:
    """An ``[[instance]]`` table; ``bench``: a ``[[bench.instance]]`` one, which has no phases."""
    name = table.named("instance")
    mode_name = table.string("mode", "command", choices=INSTANCE_MODES)
    mode = INSTANCE_MODES[mode_name]
    options = mode.parse(table)
    env = table.environment("env")
    phases = []
    phase_names: set[str] = set()
    same_as = None if bench else table.string("phases_from", choices=earlier if "phases_from" in table.data else None)
    if same_as is not None:
        if table.data.get("phase"):
            raise table.error("phase", f"give phases_from = {same_as!r} or [[instance.phase]] tables, not both")
        source = earlier[same_as]
        if source.mode != mode_name:
            raise table.error(
                "phases_from", f"instance {same_as!r} is a {source.mode!r} instance, this is {mode_name!r}"
            )
        phases = list(source.phases)
    known = COMMON_PLACEHOLDERS | provided | mode.placeholders()
    for phase_table in [] if bench else table.tables("phase", required=same_as is None):
        phase_name = phase_table.named("phase")
        if phase_name in phase_names:
            raise phase_table.error("name", f"{phase_name!r} is used twice in this instance")
        kind = phase_table.string("kind", required=True, choices=PHASE_KINDS)
        timeout = _timeout(phase_table, "timeout")
        phase_cls = PHASE_KINDS[kind]
        if mode_name not in phase_cls.modes:
            raise phase_table.error(
                "kind",
                f"a {kind!r} phase cannot run in a {mode_name!r} instance",
                f"use mode = {phase_cls.modes[0]!r} for it",
            )
        phase = phase_cls.parse(phase_table, phase_name, timeout)
        phase_table.done()
        phase_names.add(phase_name)
        check_texts(phase_table.where, phase.texts(), known | phase.fills)
        phases.append(phase)
    table.done()
    check_texts(table.where, mode.texts(options), known | mode.fills)
    check_texts(f"{table.where} env", env.values(), known)
    return Instance(name, mode_name, options, env, tuple(phases))


def env_placeholders(text: str) -> set[str]:
    """The variable names of the ``{env:NAME}`` placeholders in ``text`` (a text that loaded)."""
    return {spec for _, field, spec, _ in string.Formatter().parse(text) if field == "env" and spec}


def check_environment(workload: Workload, environ: Mapping[str, str]) -> None:
    """Refuse, before anything is built or run, an ``{env:NAME}`` whose NAME is in neither ``environ`` (the
    environment the instances start from) nor the instance's ``env`` table."""
    for instance in workload.instances:
        texts = [(f"instance {instance.name}", text) for text in INSTANCE_MODES[instance.mode].texts(instance.options)]
        texts += [(f"phase {instance.name}/{phase.name}", text) for phase in instance.phases for text in phase.texts()]
        for where, text in texts:
            for name in sorted(env_placeholders(text)):
                if name not in environ and name not in instance.env:
                    raise ConfigError(
                        f"{where} of {workload.path.name}: {{env:{name}}}: {name} is not set in the environment",
                        f"export {name}=… before running nox, or give it in the instance's env table",
                    )


def check_tools(workload: Workload, search_path: str) -> None:
    """Refuse, before anything is built, a workload whose phases run a program that is not installed."""
    for instance in workload.instances:
        for phase in instance.phases:
            for program, package in phase.tools().items():
                if shutil.which(program, path=search_path) is None:
                    raise ToolchainError(
                        f"{program} not found: phase {instance.name}/{phase.name} of {workload.path.name} runs it",
                        f"apt-get install {package}",
                    )
