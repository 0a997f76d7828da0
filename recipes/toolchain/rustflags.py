"""Where the profile flags go, and what must not be lost on the way.

The profile flags go only in ``CARGO_TARGET_<TRIPLE>_RUSTFLAGS``. Cargo joins that variable with the
``target.<triple>.rustflags`` of its config files, but it *replaces* ``[build] rustflags`` with it, and
``RUSTFLAGS`` / ``CARGO_ENCODED_RUSTFLAGS`` replace everything. So: those two are refused, and
``build.rustflags`` are carried over into the per-target variable exactly when the plain build would
have used them.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recipes.errors import ConfigError, EnvironmentRefused
from recipes.inputs import read_text
from recipes.runner import say

_GLIBC_SUFFIX = re.compile(r"^(?P<triple>.+-gnu[a-z0-9]*)\.(?P<glibc>\d+\.\d+)$")


def rust_triple(target: str) -> str:
    """The rustc triple of a cargo-zigbuild target: ``x86_64-unknown-linux-gnu.2.28`` -> without the suffix."""
    match = _GLIBC_SUFFIX.match(target)
    return match.group("triple") if match else target


def glibc_suffix(target: str) -> str | None:
    match = _GLIBC_SUFFIX.match(target)
    return match.group("glibc") if match else None


def cargo_target_var(triple: str, what: str) -> str:
    """``CARGO_TARGET_<TRIPLE>_<what>``: the triple upper-cased, ``-`` and ``.`` to ``_``."""
    return "CARGO_TARGET_" + re.sub(r"[-.]", "_", triple).upper() + f"_{what}"


def target_rustflags_var(target: str) -> str:
    return cargo_target_var(rust_triple(target), "RUSTFLAGS")


PROFILE_OPTIONS = ("profile-generate", "profile-use", "profile-sample-use")
#: the unstable (``-Z``, nightly) options that profile a build: a sample profile in, or gcov's instrumentation
UNSTABLE_PROFILE_OPTIONS = ("profile-sample-use", "profile")


def profile_flags_in(flags: Sequence[str]) -> list[str]:
    """The profile flags among ``flags`` (``-Cprofile-use=…``, ``-C profile-use=…``, ``--codegen …``,
    ``-Cprofile_use=…``, and the unstable ``-Zprofile-sample-use=…``, ``-Z profile``)."""
    found: list[str] = []
    previous = ""
    for flag in flags:
        option, unstable = "", ""
        if flag.startswith("-C") and len(flag) > 2:
            option = flag[2:]
        elif flag.startswith("--codegen="):
            option = flag[len("--codegen=") :]
        elif previous in {"-C", "--codegen"}:
            option = flag
        elif flag.startswith("-Z") and len(flag) > 2:
            unstable = flag[2:]
        elif previous == "-Z":
            unstable = flag
        # rustc reads an option's name with _ for - too (-Cprofile_use=)
        if (
            option.split("=")[0].replace("_", "-") in PROFILE_OPTIONS
            or unstable.split("=")[0].replace("_", "-") in UNSTABLE_PROFILE_OPTIONS
        ):
            found.append(flag if not previous or flag.startswith("-") else f"{previous} {flag}")
        previous = flag
    return found


def codegen_value(argv: Sequence[str], option: str) -> str | None:
    """The value of ``-C <option>=…`` in ``argv`` (``-Cx=``, ``-C x=``, ``--codegen x=``, ``--codegen=x=``, and ``_``
    for ``-`` in the option's name: rustc takes them all), the last one winning, as in rustc."""
    values = codegen_values(argv, option)
    return values[-1] if values else None


def codegen_values(argv: Sequence[str], option: str) -> list[str]:
    """Every value of ``-C <option>=…`` in ``argv``, in their order, in any of rustc's spellings
    (:func:`codegen_value`); ``-C llvm-args=…`` given several times, rustc passes LLVM them all."""
    values: list[str] = []
    previous = ""
    for arg in argv:
        if arg.startswith("-C") and len(arg) > 2:
            text = arg[2:]
        elif arg.startswith("--codegen="):
            text = arg.removeprefix("--codegen=")
        else:
            text = arg if previous in ("-C", "--codegen") else ""
        name, eq, setting = text.partition("=")
        if eq and name.replace("_", "-") == option:  # rustc reads -Cprofile_use= as -Cprofile-use=
            values.append(setting)
        previous = arg
    return values


def target_cpu_in(flags: Sequence[str]) -> str | None:
    """The ``target-cpu`` the flags set, if any (release builds should set none), in any of rustc's spellings."""
    return codegen_value(flags, "target-cpu")


def refuse_global_rustflags(env: Mapping[str, str]) -> None:
    for name in ("CARGO_ENCODED_RUSTFLAGS", "RUSTFLAGS"):
        if name in env:
            raise EnvironmentRefused(
                f"{name} is set (to {env[name]!r}): cargo then ignores every rustflags of .cargo/config.toml "
                "and the build would silently differ from the plain one",
                f"unset {name}; put flags in {target_rustflags_var('<triple>')} or .cargo/config.toml",
            )


@dataclass(frozen=True)
class CargoConfigFile:
    path: Path
    data: dict[str, Any]


def cargo_config_files(cwd: Path, env: Mapping[str, str]) -> list[CargoConfigFile]:
    """The config files cargo reads when run in ``cwd``: each directory up to /, then $CARGO_HOME."""

    def config_in(directory: Path) -> Path | None:  # config.toml, else the older name
        return next((path for name in ("config.toml", "config") if (path := directory / name).is_file()), None)

    paths = [path for directory in (cwd, *cwd.parents) if (path := config_in(directory / ".cargo"))]
    home = config_in(Path(env.get("CARGO_HOME") or Path(env.get("HOME", "~")).expanduser() / ".cargo"))
    if home is not None and home.resolve() not in {p.resolve() for p in paths}:
        paths.append(home)
    files = []
    for path in paths:
        try:
            hint = "save it as UTF-8 text; cargo cannot read it either"
            text = read_text(path, "the cargo config", ConfigError, hint)
            files.append(CargoConfigFile(path, tomllib.loads(text)))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}", "fix the file; cargo cannot read it either") from exc
    return files


def _flag_list(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ConfigError(f"{where}: rustflags must be a string or a list of strings", "fix the cargo config")


@dataclass(frozen=True)
class RustflagsPlan:
    """The flags every build gets before its profile flags, and where they came from."""

    var: str
    base: tuple[str, ...]
    carried_from: tuple[str, ...]
    config_target_flags: tuple[str, ...]


@dataclass
class _ConfigFlags:
    """The rustflags cargo's config files give a target: [build]'s (with where they come from), the
    target's own table's and the ``cfg(...)`` tables' (cargo joins those whose cfg matches to the target's)."""

    build: list[tuple[str, list[str]]] = field(default_factory=list)  # (source, flags)
    target_flags: list[str] = field(default_factory=list)
    cfg_flags: list[tuple[str, list[str]]] = field(default_factory=list)  # (source, flags)


def _read_configs(configs: Sequence[CargoConfigFile], triple: str) -> _ConfigFlags:
    read = _ConfigFlags()
    for config in configs:
        build = config.data.get("build", {})
        if isinstance(build, dict) and "rustflags" in build:
            source = f"{config.path} [build] rustflags"
            read.build.append((source, _flag_list(build["rustflags"], source)))
        targets = config.data.get("target", {})
        if not isinstance(targets, dict):
            continue
        for name, table in targets.items():
            if not isinstance(table, dict) or "rustflags" not in table:
                continue
            if name == triple:
                read.target_flags += _flag_list(table["rustflags"], f"{config.path} [target.{name}] rustflags")
            elif name.startswith("cfg("):
                source = f"{config.path} [target.'{name}'] rustflags"
                read.cfg_flags.append((source, _flag_list(table["rustflags"], source)))
    return read


def plan_rustflags(
    target: str, cwd: Path, env: Mapping[str, str], configs: Sequence[CargoConfigFile] | None = None
) -> RustflagsPlan:
    """Work out the base flags for ``target`` as the plain build would get them, or refuse. ``configs``: the
    cargo config files of ``cwd`` when the caller has read them already (:func:`cargo_config_files`)."""
    refuse_global_rustflags(env)
    var = target_rustflags_var(target)
    triple = rust_triple(target)
    existing = env.get(var, "").split()
    read = _read_configs(cargo_config_files(cwd, env) if configs is None else configs, triple)
    if "CARGO_BUILD_RUSTFLAGS" in env:
        read.build.append(("CARGO_BUILD_RUSTFLAGS", env["CARGO_BUILD_RUSTFLAGS"].split()))
    build_sources = [source for source, _ in read.build]
    build_flags = [flag for _, flags in read.build for flag in flags]
    for where, flags in (
        (var, existing),
        ("cargo config target rustflags", read.target_flags),
        ("; ".join(build_sources), build_flags),
        *read.cfg_flags,
    ):
        found = profile_flags_in(flags)
        if found:
            raise EnvironmentRefused(
                f"{where} already holds profile flags ({' '.join(found)})",
                "remove them: the pipeline adds -Cprofile-generate / -Cprofile-use itself",
            )
    carried: list[str] = []
    if build_flags:
        if read.cfg_flags:
            raise EnvironmentRefused(
                f"cannot tell whether {read.cfg_flags[0][0]} applies to {triple}, and setting {var} would drop "
                f"{build_sources[0]}",
                f"move the flags into [target.{triple}] rustflags, which cargo keeps",
            )
        if not existing and not read.target_flags:  # the plain build uses [build] rustflags
            _refuse_white_space(read.build, var, triple)
            carried = build_flags
    return RustflagsPlan(
        var=var,
        base=tuple(existing + carried),
        carried_from=tuple(build_sources) if carried else (),
        config_target_flags=tuple(read.target_flags),
    )


def _refuse_white_space(build: Sequence[tuple[str, list[str]]], var: str, triple: str) -> None:
    """A carried flag must survive the trip through ``var``, which cargo splits on white space."""
    for source, flag in ((source, flag) for source, flags in build for flag in flags):
        if any(ch.isspace() for ch in flag):
            raise EnvironmentRefused(
                f"{source} has the entry {flag!r}, which contains white space: the pipeline must carry "
                f"[build] rustflags into {var}, which cargo splits on white space, so rustc would get it "
                "in pieces",
                f"write it without spaces, or move the rustflags to [target.{triple}] rustflags, "
                "which cargo keeps as a list",
            )


def env_with_rustflags(
    base_env: Mapping[str, str], plan: RustflagsPlan, profile_flags: Sequence[str]
) -> dict[str, str]:
    """A new environment with the per-target variable set: the base flags first, then the profile flags."""
    for flag in profile_flags:
        if any(ch.isspace() for ch in flag):
            raise ConfigError(
                f"{flag!r} contains white space, which {plan.var} cannot carry",
                "use a work dir and profile store whose paths have no spaces",
            )
    env = dict(base_env)
    env[plan.var] = " ".join([*plan.base, *profile_flags])
    return env


def plain_env(base_env: Mapping[str, str], plan: RustflagsPlan) -> dict[str, str]:
    """The environment of a build without profile flags, with exactly the flags the PGO builds share."""
    env = dict(base_env)
    if plan.base:
        env[plan.var] = " ".join(plan.base)
    return env


def target_cpu_warning(flags: RustflagsPlan) -> str | None:
    """The ``target-cpu`` the build's flags set (a release build sets none), with a warning line when set."""
    cpu = target_cpu_in([*flags.base, *flags.config_target_flags])
    if cpu is not None:
        say(
            f"warning: the build's flags set target-cpu={cpu}: the binary needs that processor, not baseline "
            f"x86-64 (remove it from {flags.var} or .cargo/config.toml for a release build)"
        )
    return cpu
