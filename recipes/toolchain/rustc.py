"""The Rust toolchain and the llvm-profdata that matches it.

rustc writes raw profiles in the format of its own LLVM; only an llvm-profdata of the same LLVM
major version reads them correctly. An older one refuses, a newer one may half-merge. So the
llvm-profdata is found by rustc's LLVM major and any other is refused.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from recipes.errors import CommandFailed, ToolchainError
from recipes.inputs import home_expanded, is_file
from recipes.runner import capture, query
from recipes.toolchain.rustflags import CargoConfigFile


@dataclass(frozen=True)
class RustcInfo:
    """What ``rustc -vV`` says."""

    release: str
    host: str
    commit_hash: str
    llvm_version: str

    @property
    def llvm_major(self) -> int:
        return int(self.llvm_version.split(".")[0])


def parse_rustc_vv(text: str) -> RustcInfo:
    """Parse the output of ``rustc -vV``."""
    parts = (line.partition(":") for line in text.splitlines())
    fields = {key.strip(): value.strip() for key, sep, value in parts if sep}
    missing = [k for k in ("release", "host", "LLVM version") if k not in fields]
    if missing:
        raise ToolchainError(
            f"rustc -vV output lacks {', '.join(missing)}", "is `rustc` a real rustc? check `rustc -vV`"
        )
    return RustcInfo(
        release=fields["release"],
        host=fields["host"],
        commit_hash=fields.get("commit-hash", "unknown"),
        llvm_version=fields["LLVM version"],
    )


_LLVM_VERSION = re.compile(r"LLVM version (\d+)\.(\d+)(?:\.(\d+))?")


def parse_llvm_version(text: str, tool: str = "llvm-profdata") -> str:
    """The LLVM version an LLVM tool's ``--version`` prints (``Debian LLVM version 22.1.8``)."""
    match = _LLVM_VERSION.search(text)
    if not match:
        raise ToolchainError(f"cannot read an LLVM version from {tool} --version", f"is it {tool}?")
    return ".".join(g for g in match.groups() if g is not None)


def rustc_info(env: Mapping[str, str]) -> RustcInfo:
    return parse_rustc_vv(capture([env.get("RUSTC", "rustc"), "-vV"], env=env))


def rustc_sysroot(env: Mapping[str, str]) -> Path:
    return Path(capture([env.get("RUSTC", "rustc"), "--print", "sysroot"], env=env).strip())


def cargo_version(env: Mapping[str, str], cwd: Path | None = None) -> str:
    return capture(["cargo", "--version"], env=env, cwd=cwd).strip()


@dataclass(frozen=True)
class ResolvedRustc:
    """The rustc cargo builds with where it runs: its absolute path (a rustup proxy's toolchain's own rustc), how it
    was chosen (``source``), the rustup toolchain (None when rustup did not choose it) and what ``-vV`` says."""

    path: Path
    source: str
    toolchain: str | None
    info: RustcInfo


def split_toolchain(cargo: Sequence[str]) -> tuple[str | None, list[str]]:
    """The ``+toolchain`` of a cargo command (``cargo +1.94.0 build``) and the command without it."""
    words = list(cargo)
    if len(words) > 1 and words[1].startswith("+"):
        return words[1][1:], [words[0], *words[2:]]
    return None, words


def _quiet(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for a question to rustup: its errors one line, without a backtrace."""
    return {**env, "RUST_BACKTRACE": "0", "RUST_LIB_BACKTRACE": "0"}


def _program(cwd: Path, env: Mapping[str, str], configs: Sequence[CargoConfigFile]) -> tuple[str, str, Path]:
    """The rustc program cargo runs (RUSTC > CARGO_BUILD_RUSTC > ``build.rustc`` > rustc), where that was said,
    and the directory a relative path in it is relative to."""
    for var in ("RUSTC", "CARGO_BUILD_RUSTC"):
        if env.get(var, "").strip():
            return env[var].strip(), var, cwd
    for config in configs:
        build = config.data.get("build")
        value = build.get("rustc") if isinstance(build, dict) else None
        if isinstance(value, str) and value.strip():
            return value.strip(), f"build.rustc in {config.path}", config.path.parent.parent
    return "rustc", "default", cwd


def _which(program: str, where: str, base: Path, env: Mapping[str, str]) -> Path:
    if "/" in program:
        path = home_expanded(Path(program))
        path = path if path.is_absolute() else base / path
        if is_file(path) and os.access(path, os.X_OK):
            return path.absolute()
    elif found := shutil.which(program, path=env.get("PATH", os.defpath)):
        return Path(found).absolute()
    raise ToolchainError(
        f"{where} names rustc {program}, which is no program here (looked for from {base})",
        "give the path of a rustc, or unset it",
    )


_REASON = re.compile(r"^(\S+) \((.*)\)")


def _rustup_source(reason: str, plus: str | None) -> str:
    """How rustup chose the toolchain, from the reason ``rustup show active-toolchain`` gives."""
    if plus is not None:
        return f"+{plus} in PGO_CARGO"
    if "RUSTUP_TOOLCHAIN" in reason:
        return "RUSTUP_TOOLCHAIN"
    if file := re.search(r"overridden by '([^']+)'", reason):
        return f"{Path(file.group(1)).name} at {file.group(1)}"
    if override := re.search(r"directory override for '([^']+)'", reason):
        return f"rustup override of {override.group(1)}"
    return "default"


def _not_chosen(message: str, cwd: Path, env: Mapping[str, str], plus: str | None) -> ToolchainError:
    """rustup's refusal to choose a toolchain in ``cwd`` in one line: a toolchain that is not installed named with who
    pins it, where, and the command that installs it; anything else (a toolchain file it cannot parse) as rustup
    says it."""
    name = re.search(r"toolchain '([^']+)' is not installed", message)
    if name is None:
        return ToolchainError(
            f"rustup cannot choose a Rust toolchain for the crate in {cwd}: {message}",
            "fix what rustup names (`rustup show active-toolchain` there says the same)",
        )
    toolchain = name.group(1)
    file = re.search(r"toolchain file at '([^']+)'", message)
    if plus is not None:
        who = f"+{plus} in PGO_CARGO"
    elif file is not None:
        who = f"{Path(file.group(1)).name} at {file.group(1)}"
    elif env.get("RUSTUP_TOOLCHAIN"):
        who = "RUSTUP_TOOLCHAIN"
    else:
        who = "rustup's settings"
    return ToolchainError(
        f"Rust toolchain {toolchain} is not installed: {who} chooses it for the crate in {cwd}",
        f"install it there: cd {cwd} && rustup toolchain install {toolchain} --profile minimal -c llvm-tools",
    )


def _rustup_toolchain(rustup: Path, cwd: Path, env: Mapping[str, str], plus: str | None) -> tuple[str, str]:
    """The toolchain rustup chooses in ``cwd`` and how (one it cannot choose refused in one line)."""
    done = query([str(rustup), "show", "active-toolchain"], env=_quiet(env), cwd=cwd)
    match = _REASON.match(done.stdout.strip())
    if done.returncode != 0 or match is None:
        said = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        first = next((line for line in said if line.lower().startswith("error")), said[0] if said else "no output")
        raise _not_chosen(re.sub(r"^error:\s*", "", first, flags=re.IGNORECASE), cwd, env, plus)
    return match.group(1), _rustup_source(match.group(2), plus)


def _rustup_of(path: Path, env: Mapping[str, str]) -> Path | None:
    """rustup, when ``path`` is one of its proxies (a symbolic or a hard link to it), else None."""
    if path.resolve().name.startswith("rustup"):
        return path.resolve()
    found = shutil.which("rustup", path=env.get("PATH", os.defpath))
    return Path(found) if found is not None and Path(found).samefile(path) else None


def _toolchain_rustc(proxy: Path, toolchain: str, chosen: str, cwd: Path, env: Mapping[str, str]) -> Path:
    """The toolchain's own rustc, from its sysroot (asked through rustup's proxy); a toolchain rustup has but cannot
    run rustc of (an interrupted install: cargo there, rustc missing, rustup's bare "Missing manifest in toolchain")
    refused in one line naming who chose it and the install that repairs it."""
    try:
        sysroot = Path(capture([str(proxy), "--print", "sysroot"], env=_quiet(env), cwd=cwd).strip())
    except CommandFailed as exc:
        last = exc.message.split(" failed with exit code ", 1)[-1].partition(": ")[2]  # rustup's last line
        said = re.sub(r"^error:\s*", "", last, flags=re.IGNORECASE) or "no output"
        raise ToolchainError(
            f"Rust toolchain {toolchain} (chosen by {chosen}) for the crate in {cwd} cannot run rustc: rustup says "
            f'"{said}": its install is incomplete',
            f"install it again: cd {cwd} && rustup toolchain install {toolchain} --profile minimal -c llvm-tools",
        ) from exc
    return sysroot / "bin" / "rustc"


def resolve_rustc(
    cwd: Path, env: Mapping[str, str], configs: Sequence[CargoConfigFile], plus: str | None = None
) -> tuple[ResolvedRustc, dict[str, str]]:
    """The rustc cargo builds with in ``cwd`` (the crate's directory), asked once, before anything is built: the
    toolchain (``+X`` of PGO_CARGO > RUSTUP_TOOLCHAIN > rustup's override or rust-toolchain(.toml) > default)
    and the program (RUSTC > CARGO_BUILD_RUSTC > ``build.rustc`` of the cargo configs > rustc). Returns it and a
    new environment: ``RUSTC`` its absolute path, ``RUSTUP_TOOLCHAIN`` rustup's choice (what ``+X`` is for rustup),
    so that every later question and the build itself get this compiler."""
    new = dict(env)
    if plus is not None:
        new["RUSTUP_TOOLCHAIN"] = plus
    program, where, base = _program(cwd, new, configs)
    path = _which(program, where, base, new)
    toolchain: str | None = None
    source = where
    if rustup := _rustup_of(path, new):  # a rustup proxy: the toolchain's own rustc
        toolchain, chosen = _rustup_toolchain(rustup, cwd, new, plus)
        new["RUSTUP_TOOLCHAIN"] = toolchain
        source = chosen if where == "default" else f"{where} ({chosen})"
        path = _toolchain_rustc(path, toolchain, chosen, cwd, new)
    info = parse_rustc_vv(capture([str(path), "-vV"], env=new, cwd=cwd))
    new["RUSTC"] = str(path)
    return ResolvedRustc(path, source, toolchain, info), new


@dataclass(frozen=True)
class ProfdataTool:
    path: Path
    llvm_version: str

    @property
    def llvm_major(self) -> int:
        return int(self.llvm_version.split(".")[0])


def tool_version(argv: list[str], tool: str, hint: str, env: Mapping[str, str]) -> str:
    """The LLVM version ``argv`` (an LLVM tool's version query, run with ``env``) prints; a program that fails it
    or prints no LLVM version is not ``tool``, in one line naming it."""
    query = " ".join(argv)
    try:
        return parse_llvm_version(capture(argv, env=env), tool)
    except CommandFailed as exc:
        detail = exc.message.rsplit(" failed ", 1)[-1]  # with exit code N: its last line of stderr
        raise ToolchainError(f"{argv[0]} is not {tool}: `{query}` failed {detail}", hint) from exc
    except ToolchainError as exc:
        raise ToolchainError(f"{argv[0]} is not {tool}: `{query}` prints no LLVM version", hint) from exc


def llvm_candidates(tool: str, major: int, search_path: str, llvm_root: Path = Path("/usr/lib")) -> list[Path]:
    """Where an LLVM ``tool`` of LLVM ``major`` is, best first: ``<tool>-<major>`` on PATH, then Debian's
    ``/usr/lib/llvm-<major>/bin``."""
    named = shutil.which(f"{tool}-{major}", path=search_path)
    candidates = [*([Path(named)] if named else []), llvm_root / f"llvm-{major}" / "bin" / tool]
    return [path for path in candidates if path.is_file()]


def explicit_program(explicit: str, var: str, env: Mapping[str, str], fix: str) -> Path:
    """The program ``var`` names: an executable file at that path, else that name on PATH; refused when neither."""
    path = Path(explicit)
    if is_file(path) and os.access(path, os.X_OK):  # a name no file can have (ENAMETOOLONG): no program
        return path
    found = shutil.which(explicit, path=env.get("PATH", os.defpath))
    if not found:
        raise ToolchainError(f"{var}={explicit}: no such program", fix)
    return Path(found)


def find_profdata(info: RustcInfo, sysroot: Path, env: Mapping[str, str], explicit: str | None) -> ProfdataTool:
    """The llvm-profdata to merge with: PGO_LLVM_PROFDATA if given, else one of rustc's LLVM major.

    Whatever is chosen must be of rustc's LLVM major version, or it is refused.
    """
    rustup = f" --toolchain {sysroot.name}" if sysroot.parent.name == "toolchains" else ""
    fix = (
        f"use rustc's own (`rustup component add llvm-tools{rustup}`) or one of LLVM {info.llvm_major} "
        f"(Debian: `apt-get install llvm-{info.llvm_major}`)"
    )
    if explicit:
        path = explicit_program(explicit, "PGO_LLVM_PROFDATA", env, fix)
    else:
        own = sysroot / "lib" / "rustlib" / info.host / "bin" / "llvm-profdata"  # rustup's llvm-tools
        existing = [own] if own.is_file() else []
        existing += llvm_candidates("llvm-profdata", info.llvm_major, env.get("PATH", os.defpath))
        if not existing:
            raise ToolchainError(f"no llvm-profdata of LLVM {info.llvm_major} (rustc {info.release}) found", fix)
        path = existing[0]
    # `merge --version` works on every LLVM release; a bare `--version` does not on LLVM 14.
    tool = ProfdataTool(path, tool_version([str(path), "merge", "--version"], "llvm-profdata", fix, env))
    if tool.llvm_major != info.llvm_major:
        raise ToolchainError(
            f"{tool.path} is LLVM {tool.llvm_version} but rustc {info.release} is LLVM {info.llvm_version}: "
            f"it cannot read this rustc's raw profiles correctly",
            fix,
        )
    return tool
