"""One typed, validated configuration from pyproject.toml, PGO_* variables and session posargs.

Precedence, lowest to highest: ``[tool.pgo]`` in pyproject.toml, then ``PGO_*`` environment variables,
then the session's posargs (``--min-functions 100``). Every error names where the bad value came from
and how to fix it.
"""

from __future__ import annotations

import argparse
import difflib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recipes.errors import ConfigError
from recipes.inputs import kind, not_a_file, parse_toml, read_text, user_path

#: bounds of numeric settings: beyond them a count or a deadline overflows later, after the build
MAX_COUNT = 2**31 - 1
MAX_SCALE = 10_000.0
MAX_SECONDS = 7 * 24 * 3600.0
#: the shortest time a phase may be given: a timeout below it ends the phase before any program has started
MIN_SECONDS = 0.1
#: the reserved shard name: the crate's own test suite, built as the instrumented build (recipes/stages/tests_shard.py)
TESTS_SHARD = "tests"


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"{text!r} is not a boolean")


#: a Cargo package name (cargo's own rule: ASCII letters, digits, ``-`` and ``_``)
_PACKAGE = re.compile(r"[A-Za-z0-9_-]+")


def _c_choice(text: str) -> bool | tuple[str, ...]:
    """``PGO_C`` / ``PGO_CXX``: 1 or 0 (every crate's build-script C, or none), or the packages whose C is profiled,
    comma-separated (``zstd-sys,libz-sys``: the others' C is compiled by the system's compiler, unprofiled)."""
    stripped = text.strip()
    if stripped.lower() in {"1", "true", "yes", "on", "0", "false", "no", "off", ""}:
        return _bool(stripped)
    names = [n.strip() for n in stripped.split(",")]
    for name in names:
        if not name:
            raise ValueError(f"{text!r} names an empty package")
        if not _PACKAGE.fullmatch(name) or not name.isascii():
            raise ValueError(f"{text!r}: {name!r} is not a package name")
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None:
        raise ValueError(f"{text!r} names {twice} twice")
    return tuple(names)


def _int(text: str) -> int:
    """A count: ASCII digits only (no sign, exponent, underscore or other script's digits), at most MAX_COUNT."""
    stripped = text.strip()
    if stripped.startswith("-") and stripped[1:].isdigit():
        raise ValueError(f"{text!r} is negative")
    if not stripped.isascii() or not stripped.isdigit():
        raise ValueError(f"{text!r} is not a whole number")
    value = int(stripped) if len(stripped) <= len(str(MAX_COUNT)) else MAX_COUNT + 1
    if value > MAX_COUNT:
        raise ValueError(f"{text!r} is too large")
    return value


def _positive(text: str, maximum: float, minimum: float = 0.0) -> float:
    stripped = text.strip()
    try:
        value = float(stripped)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not stripped.isascii() or "_" in stripped:
        raise ValueError(f"{text!r} is not a number")
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    if not value > 0:
        raise ValueError(f"{text!r} is not above 0")
    if value < minimum:
        raise ValueError(f"{text!r} is below the floor of {minimum:g}")
    if value > maximum:
        raise ValueError(f"{text!r} is too large")
    return value


def _scale(text: str) -> float:
    return _positive(text, MAX_SCALE)


def _seconds(text: str) -> float:
    return _positive(text, MAX_SECONDS, MIN_SECONDS)


def _percent(text: str) -> float:
    """A share in %, 0 to 100."""
    stripped = text.strip()
    if stripped.isascii() and re.fullmatch(r"0+(\.0*)?", stripped):
        return 0.0
    return _positive(text, 100.0)


def _glibc(text: str) -> str:
    """A glibc release, as the ``GLIBC_x.y`` version-needs name them: ``2.28``, ``2.3.4``."""
    stripped = text.strip()
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)+", stripped) or not stripped.isascii():
        raise ValueError(f"{text!r} is not a glibc version")
    return stripped


#: what each kind of value must look like, and an example of it, for the refusals
FORMS: dict[Callable[[str], Any], tuple[str, str]] = {
    _bool: ("1 or 0", "1"),
    _int: (f"a whole number from 0 to {MAX_COUNT}", "100"),
    _scale: (f"a number above 0 and at most {MAX_SCALE:g}", "0.5"),
    _seconds: (f"a number of seconds from {MIN_SECONDS:g} to {MAX_SECONDS:g}", "600"),
    _glibc: ("a glibc release as GLIBC_x.y names it", "2.28"),
    _c_choice: ("1, 0 or the packages whose C is profiled, comma-separated", "1"),
}


@dataclass(frozen=True)
class Setting:
    """One configuration key: its name in [tool.pgo], its PGO_* variable, its posarg and its parser."""

    key: str
    env: str
    parse: Callable[[str], Any]
    help: str

    @property
    def option(self) -> str:
        return "--" + self.key.replace("_", "-")


SETTINGS: tuple[Setting, ...] = (
    Setting("manifest", "PGO_MANIFEST", str, "Cargo.toml of the crate to build (default: Cargo.toml)"),
    Setting("package", "PGO_PACKAGE", str, "the cargo package (default: the manifest's package)"),
    Setting("bin", "PGO_BIN", str, "the binary target (default: the package's only binary)"),
    Setting("features", "PGO_FEATURES", str, "cargo features, comma-separated"),
    Setting("locked", "PGO_LOCKED", _bool, "pass --locked to cargo (Cargo.lock must be up to date)"),
    Setting(
        "workload",
        "PGO_WORKLOAD",
        str,
        "training workload: a name in profiles/ or a path to a TOML file; several, comma-separated: shards "
        "(tests: the crate's own tests)",
    ),
    Setting("weights", "PGO_WEIGHTS", str, "each shard's share of the profile: name=weight, comma-separated"),
    Setting("target", "PGO_TARGET", str, "target triple, optionally with a glibc suffix (default: rustc's host)"),
    Setting("cargo", "PGO_CARGO", str, "the cargo build command of both builds (default: cargo build)"),
    Setting("generate_linker", "PGO_GENERATE_LINKER", str, "linker of the instrumented build only"),
    Setting("store", "PGO_PROFILE_STORE", str, "the profile store directory (default: /tmp/<bin>-pgo)"),
    Setting("out", "PGO_OUT", str, "the work directory (default: target/pgo)"),
    Setting("profdata", "PGO_PROFDATA", str, "build from this profile: no instrumented build, no training"),
    Setting("llvm_profdata", "PGO_LLVM_PROFDATA", str, "the llvm-profdata to use (must be rustc's LLVM major)"),
    Setting("min_functions", "PGO_MIN_FUNCTIONS", _int, "fewest functions the training must execute"),
    Setting("max_missing", "PGO_MAX_MISSING", _int, "most functions the optimised build may find without profile"),
    Setting("max_glibc", "PGO_MAX_GLIBC", _glibc, "highest GLIBC_x.y version the binary may need"),
    Setting("verify", "PGO_VERIFY", _bool, "replay the workload on the optimised binary (default: on after training)"),
    Setting("test", "PGO_TEST", _bool, "also build and run the test suite with the profile"),
    Setting("train_scale", "PGO_TRAIN_SCALE", _scale, "factor on every request and run count of the workload"),
    Setting("phase_timeout", "PGO_PHASE_TIMEOUT", _seconds, "seconds each training phase may take (default 300)"),
    Setting("drop_bad_profraw", "PGO_DROP_BAD_PROFRAW", _bool, "merge: drop corrupt .profraw files with a warning"),
    Setting(
        "partial",
        "PGO_PARTIAL",
        _bool,
        "build from the profile without the functions the training never ran: they are compiled as with no profile, "
        "not as cold (default: 1)",
    ),
    Setting(
        "carry",
        "PGO_CARRY",
        _bool,
        "a given profile (PGO_PROFDATA) of another version, dependency set or toolchain of the crate: its records "
        "matched to this build's functions by name without cargo's hashes and CFG hash (default: 1)",
    ),
    Setting(
        "min_survival",
        "PGO_MIN_SURVIVAL",
        _percent,
        "least share of a carried profile's count this build must use, in % (default: 80)",
    ),
    Setting(
        "reference",
        "PGO_REFERENCE",
        str,
        "merge compares the training's profile with this one (a good profile the crate keeps, or its last release's)",
    ),
    Setting(
        "max_lost",
        "PGO_MAX_LOST",
        _percent,
        "most of the reference's count (in %) the training may lose in functions it did not run (default: 25)",
    ),
    Setting("bolt", "PGO_BOLT", _bool, "link optimise for BOLT (--emit-relocs); pgo then runs the bolt stage"),
    Setting("bolt_args", "PGO_BOLT_ARGS", str, "llvm-bolt's optimisation flags (default: rustc opt-dist's)"),
    Setting("llvm_bolt", "PGO_LLVM_BOLT", str, "the llvm-bolt to use (must be rustc's LLVM major; merge-fdata beside)"),
    Setting("bolt_profile", "PGO_BOLT_PROFILE", str, "BOLT from this .fdata: no BOLT instrumentation, no training"),
    Setting(
        "c",
        "PGO_C",
        _c_choice,
        "profile the C/C++ of build scripts: 1, 0 or a list of packages (default: when clang of rustc's LLVM is there)",
    ),
    Setting(
        "cxx", "PGO_CXX", _c_choice, "the C++ alone: 1, 0 (the system's c++, unprofiled) or a list (default: PGO_C)"
    ),
    Setting("clang", "PGO_CLANG", str, "the clang of the C profile (must be rustc's LLVM major; clang++ beside)"),
    Setting("max_unprofiled_c", "PGO_MAX_UNPROFILED_C", _int, "most crates whose C the profile flags may miss"),
)
BY_KEY = {s.key: s for s in SETTINGS}
#: settings of [tool.pgo] that describe its crate, dropped when another manifest is given
CRATE_KEYS = ("package", "bin", "features", "locked", "workload", "weights")
BY_ENV = {s.env: s for s in SETTINGS}


@dataclass(frozen=True)
class Config:
    """The validated configuration. Paths are absolute."""

    project_dir: Path
    manifest: Path
    package: str | None = None
    bin: str | None = None
    features: tuple[str, ...] = ()
    locked: bool = False
    #: the first shard's workload (the only one without shards): what the stages that run one workload take
    workload: str | None = None
    #: every shard's workload, in the order given, when there are two or more (recipes/workload/shards.py); else empty
    shards: tuple[str, ...] = ()
    #: the shards' weights as given (``name=weight``), by shard name; a shard not named weighs 1
    weights: tuple[tuple[str, float], ...] = ()
    target: str | None = None
    cargo: tuple[str, ...] = ("cargo", "build")
    generate_linker: str | None = None
    store: Path | None = None
    out: Path = Path("target/pgo")
    profdata: Path | None = None
    llvm_profdata: str | None = None
    min_functions: int | None = None
    max_missing: int | None = None
    max_glibc: str | None = None
    verify: bool | None = None
    test: bool = False
    train_scale: float = 1.0
    phase_timeout: float | None = None
    drop_bad_profraw: bool = False
    #: partial training: the optimised build reads the profile without its never-run records (PGO_PARTIAL)
    partial: bool = True
    #: a given profile carried forward to this build (PGO_CARRY), and the least share of its count it must keep
    carry: bool = True
    min_survival: float = 80.0
    #: the health gate: merge's profile against this one (PGO_REFERENCE), and the share of its count it may lose
    reference: Path | None = None
    max_lost: float = 25.0
    bolt: bool = False
    bolt_args: str | None = None
    llvm_bolt: str | None = None
    bolt_profile: Path | None = None
    #: PGO_C: every crate's build-script C and C++ (True), none (False), these packages' only, or the default (None)
    c: bool | tuple[str, ...] | None = None
    #: PGO_CXX: the same for the C++ alone; None: as PGO_C
    cxx: bool | tuple[str, ...] | None = None
    clang: str | None = None
    max_unprofiled_c: int | None = None
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    def source(self, key: str) -> str:
        """Where a setting came from, for error messages."""
        return self.sources.get(key, "the default")

    def verify_wanted(self, *, trained: bool) -> bool:
        """Whether the optimised binary replays the workload: ``PGO_VERIFY`` when set, else on when this run trained
        the profile (``nox -s pgo``) and off when it was given one or runs ``optimise`` alone."""
        return self.verify if self.verify is not None else trained


def _suggest(name: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    return f"did you mean {close[0]}?" if close else f"known: {', '.join(sorted(choices))}"


def read_pyproject(project_dir: Path) -> dict[str, Any]:
    """The ``[tool.pgo]`` table of the project's pyproject.toml (empty when there is none)."""
    path = project_dir / "pyproject.toml"
    if not path.is_file():
        return {}
    text = read_text(path, "", ConfigError, "save it as UTF-8 text")
    data = parse_toml(text, str(path), ConfigError, "fix the syntax")
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: tool must be a table, not {kind(tool)}", "write its tables as [tool.<name>]")
    table = tool.get("pgo", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.pgo] must be a table", "write it as [tool.pgo] with key = value lines")
    return table


def parse_posargs(posargs: Sequence[str]) -> dict[str, str]:
    """``--min-functions 10`` style overrides; anything unknown is a :class:`ConfigError`."""
    # allow_abbrev=False: an abbreviation (``--min``) is an unknown argument, never taken for a whole name, nor, when
    # it could be several (``--m``), argparse's usage and exit 2
    parser = argparse.ArgumentParser(
        prog="nox -s <session> --", add_help=False, allow_abbrev=False, exit_on_error=False
    )
    for setting in SETTINGS:
        parser.add_argument(setting.option, dest=setting.key, default=None)
    try:
        namespace, rest = parser.parse_known_args(list(posargs))
    except argparse.ArgumentError as exc:
        raise ConfigError(f"session arguments: {exc}", "write them as --name value") from exc
    if rest:
        options = [s.option for s in SETTINGS]
        flag = rest[0].split("=")[0]
        whole = [option for option in options if len(flag) > 2 and option.startswith(flag)]
        if flag.startswith("--") and whole:
            raise ConfigError(
                f"session arguments: {flag} is an abbreviation of {' or '.join(whole)}",
                f"write {whole[0]} whole" if len(whole) == 1 else "write the one you mean whole",
            )
        raise ConfigError(f"session arguments: unknown argument {rest[0]!r}", _suggest(flag, options))
    return {k: v for k, v in vars(namespace).items() if v is not None}


def _from_pyproject(project_dir: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """``[tool.pgo]``'s settings as the text a variable would hold, and where each came from."""
    raw: dict[str, Any] = {}
    sources: dict[str, str] = {}
    pyproject = project_dir / "pyproject.toml"
    for key, value in read_pyproject(project_dir).items():
        if key not in BY_KEY:
            raise ConfigError(f"{pyproject} [tool.pgo]: unknown key {key!r}", _suggest(key, list(BY_KEY)))
        setting = BY_KEY[key]
        where = f"{pyproject} [tool.pgo] {key}"
        if isinstance(value, bool) and setting.parse not in (_bool, _c_choice):
            form, example = FORMS.get(setting.parse, ("a string", '"…"'))
            raise ConfigError(f"{where}: {value!r} is a boolean: expected {form}", f"for example {key} = {example}")
        if isinstance(value, float) and setting.parse in (str, _glibc):
            # str(2.30) is '2.3': TOML keeps a float's value, not its digits, and a version or a name is its digits
            raise ConfigError(
                f"{where}: the number {value!r} where a string is expected (TOML does not keep a number's digits: "
                "2.30 reads as 2.3)",
                f'write it as a string, quoted: {key} = "…"',
            )
        if isinstance(value, bool | int | float) and not isinstance(value, str):
            value = str(int(value)) if isinstance(value, bool) else str(value)
        elif isinstance(value, list) and key in ("features", "workload", "c", "cxx"):
            other = next((v for v in value if not isinstance(v, str)), None)
            if other is not None:  # str() of it before: [1, 2] read as "1,2", [true] as the feature "True"
                raise ConfigError(f"{where}: expected a list of strings, got {kind(other)} in it", setting.help)
            value = ",".join(value)
        elif isinstance(value, dict) and key == "weights":
            value = ",".join(f"{name}={weight}" for name, weight in value.items())
        elif not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {type(value).__name__}", setting.help)
        raw[key] = value
        sources[key] = where
    return raw, sources


def load_config(project_dir: Path, environ: Mapping[str, str], posargs: Sequence[str] = ()) -> Config:
    """Merge the three sources into one :class:`Config`."""
    raw, sources = _from_pyproject(project_dir)
    options = parse_posargs(posargs)
    if "PGO_MANIFEST" in environ or "manifest" in options:
        # [tool.pgo] describes its own crate: another manifest drops what it says of that crate.
        for key in CRATE_KEYS:
            if raw.pop(key, None) is not None:
                sources.pop(key, None)
    for name, value in environ.items():
        if not name.startswith("PGO_"):
            continue
        if name not in BY_ENV:
            raise ConfigError(f"unknown variable {name} in the environment", _suggest(name, list(BY_ENV)))
        raw[BY_ENV[name].key] = value
        sources[BY_ENV[name].key] = name
    raw.update(options)
    sources.update({key: BY_KEY[key].option for key in options})
    parsed: dict[str, Any] = {}
    for key, text in raw.items():
        setting = BY_KEY[key]
        if text == "" and setting.parse not in (_bool, _c_choice):
            continue  # an empty variable means "not set"
        try:
            parsed[key] = setting.parse(text)  # every value is text here: str keeps it as it is
        except ValueError as exc:
            form, example = FORMS.get(setting.parse, ("a string", "…"))
            hint = _example(sources[key], setting, example)
            raise ConfigError(f"{sources[key]}: {exc}: expected {form}", hint) from exc
    return _build(project_dir, parsed, sources)


def _example(source: str, setting: Setting, example: str) -> str:
    """How to write the setting where it was found: ``PGO_X=1``, ``--x 1`` or ``x = 1`` in [tool.pgo]."""
    if source == setting.env:
        return f"for example {setting.env}={example}"
    if source == setting.option:
        return f"for example {setting.option} {example}"
    if setting.parse in (_bool, _c_choice):
        example = "true"
    return f"for example {setting.key} = {example} in [tool.pgo]"


def _build(project_dir: Path, parsed: dict[str, Any], sources: dict[str, str]) -> Config:
    project_dir = project_dir.resolve()
    kwargs: dict[str, Any] = {"project_dir": project_dir, "sources": sources}
    kwargs["manifest"] = user_path(
        parsed.pop("manifest", "Cargo.toml"), project_dir, sources.get("manifest", "the manifest")
    ).resolve()
    if "features" in parsed:
        kwargs["features"] = tuple(f.strip() for f in parsed.pop("features").split(",") if f.strip())
    if "cargo" in parsed:
        kwargs["cargo"] = _cargo(parsed.pop("cargo"), sources["cargo"])
    if "workload" in parsed:
        kwargs.update(_shards(project_dir, parsed.pop("workload"), parsed.pop("weights", None), sources))
    elif "weights" in parsed:
        raise ConfigError(
            f"{sources['weights']}: weights without shards: no workload is given",
            'name the shards: PGO_WORKLOAD=main,breadth (or workload = ["main", "breadth"] in [tool.pgo])',
        )
    for key in ("out", "store", "profdata", "bolt_profile", "reference"):
        if key in parsed:
            kwargs[key] = user_path(parsed.pop(key), project_dir, sources[key])
    if "reference" in kwargs and (what := not_a_file(kwargs["reference"])) is not None:
        said = what if what == "no such file" else f"{what}, not a regular file"
        raise ConfigError(
            f"{sources['reference']}: {kwargs['reference']}: {said}",
            "give the path of the profile to compare the training with (a .profdata the crate keeps, or its last "
            "release's)",
        )
    kwargs.setdefault("out", project_dir / "target" / "pgo")
    kwargs.update(parsed)
    return Config(**kwargs)  # a key Config has no field for is a bug: its TypeError names it


#: options of the cargo command the pipeline gives itself (recipes/toolchain/cargo/invocation.py), and where to set
#: what each says: given in PGO_CARGO too, cargo refuses the command, or builds what the pipeline does not check
_CARGO_OPTIONS = {
    "--release": "the pipeline builds the release profile: leave it out",
    "-r": "the pipeline builds the release profile: leave it out",
    "--profile": "the pipeline builds the release profile: set its options in [profile.release] of Cargo.toml",
    "--target": "set PGO_TARGET",
    "--manifest-path": "set PGO_MANIFEST",
    "-p": "set PGO_PACKAGE",
    "--package": "set PGO_PACKAGE",
    "--bin": "set PGO_BIN",
    "--features": "set PGO_FEATURES",
    "-F": "set PGO_FEATURES",
    "--locked": "set PGO_LOCKED=1",
    "--target-dir": "leave it out: each build has its own target dir",
}


def _cargo(text: str, source: str) -> tuple[str, ...]:
    """``PGO_CARGO``: ``cargo [+toolchain] build|zigbuild [options]``, without an option the pipeline gives."""
    words = tuple(text.split())
    plus = len(words) > 1 and words[1].startswith("+")
    subcommand = words[2 if plus else 1] if len(words) > (2 if plus else 1) else None
    # before: 'cargo + build' reached rustup ("invalid toolchain name ''", a backtrace in the log), 'cargo test' and
    # 'cargo run' built something else than the binary, after the build started
    if words[:1] != ("cargo",) or subcommand not in ("build", "zigbuild") or (plus and words[1] == "+"):
        raise ConfigError(
            f"{source}: {' '.join(words)!r} is not a cargo build command",
            'write it as "cargo build" or "cargo zigbuild"',
        )
    for word in words[3 if plus else 2 :]:
        option = word.split("=", 1)[0]
        if option in _CARGO_OPTIONS:
            raise ConfigError(
                f"{source}: {' '.join(words)!r} gives {option}, which the pipeline gives cargo itself",
                _CARGO_OPTIONS[option],
            )
    return words


def shard_name(workload: str) -> str:
    """A shard's name: its workload file's stem (``profiles/breadth.toml`` and ``breadth`` are ``breadth``)."""
    return Path(workload).stem if workload.endswith(".toml") else Path(workload).name


def _shards(project_dir: Path, text: str, weights: str | None, sources: dict[str, str]) -> dict[str, Any]:
    """``workload`` (one, or several comma-separated: the shards) and ``weights`` (``name=weight,…``): a path no
    file can have, a shard named twice (two paths with one stem too), a weight that is not a positive number and a
    weight for a shard not named are refused here, before anything is built."""
    workloads = [w.strip() for w in text.split(",")]
    if "" in workloads:  # before: left out, and PGO_WORKLOAD=, trained the default workload
        raise ConfigError(
            f"{sources['workload']}: {text!r} names an empty workload",
            "name each shard once, comma-separated: PGO_WORKLOAD=main,breadth",
        )
    for workload in workloads:  # a name is profiles/<name>.toml (recipes/workload/file.py: workload_path)
        is_path = workload.endswith(".toml") or "/" in workload
        if is_path:
            user_path(workload, project_dir, sources["workload"])
        else:
            user_path(f"{workload}.toml", project_dir / "profiles", sources["workload"])
    names = [shard_name(w) for w in workloads]
    _refuse_tests_shard(workloads, names, sources["workload"])
    for i, name in enumerate(names):
        if name in names[:i]:
            first = workloads[names.index(name)]
            raise ConfigError(
                f"{sources['workload']}: the shard {name} is named twice ({first} and {workloads[i]})",
                "a shard is named by its workload file's stem: give each shard once, or rename one file",
            )
    parsed: list[tuple[str, float]] = []
    for item in (w.strip() for w in (weights or "").split(",") if w.strip()):
        name, equals, number = item.partition("=")
        name = name.strip()
        try:
            if not equals:
                raise ValueError(f"{item!r} is not name=weight")
            weight = _positive(number, float(MAX_COUNT))
        except ValueError as exc:
            raise ConfigError(
                f"{sources['weights']}: the weight of {name or item!r}: {exc}: expected a number above 0",
                "for example PGO_WEIGHTS=main=9,breadth=1 (or weights = { main = 9, breadth = 1 } in [tool.pgo])",
            ) from exc
        if name not in names:
            raise ConfigError(
                f"{sources['weights']}: a weight for {name!r}, which is not a shard (the shards: {', '.join(names)})",
                "a shard is named by its workload file's stem: name one of the shards, or add its workload",
            )
        if name in (n for n, _ in parsed):
            raise ConfigError(f"{sources['weights']}: {name!r} is weighed twice", "give each shard one weight")
        parsed.append((name, weight))
    return {
        # the first shard with a workload file: what the stages that run one workload take (the tests shard has none)
        "workload": next((w for w in workloads if w != TESTS_SHARD), None),
        "shards": tuple(workloads) if len(workloads) > 1 else (),
        "weights": tuple(parsed),
    }


def _refuse_tests_shard(workloads: list[str], names: list[str], source: str) -> None:
    """The reserved shard ``tests`` (the crate's own test suite): never alone, and never a workload file's stem."""
    for workload, name in zip(workloads, names, strict=True):
        if name == TESTS_SHARD and workload != TESTS_SHARD:
            raise ConfigError(
                f"{source}: the workload file {workload} is named like the reserved shard {TESTS_SHARD} (the crate's "
                "own test suite, which has no workload file)",
                f"rename the file; write {TESTS_SHARD} alone among the shards to train on the crate's tests",
            )
    if workloads == [TESTS_SHARD]:
        raise ConfigError(
            f"{source}: the shard {TESTS_SHARD} (the crate's own test suite) alone: most of its records are of code "
            "the shipped binary does not have (cfg(test), the test harness), and no workload runs the binary",
            f"train it beside a workload: PGO_WORKLOAD=main,{TESTS_SHARD} (or workload = "
            f'["main", "{TESTS_SHARD}"] in [tool.pgo])',
        )
