"""The Rust toolchain and the llvm-profdata that matches it.

rustc writes raw profiles in the format of its own LLVM; only an llvm-profdata of the same LLVM
major version reads them correctly. An older one refuses, a newer one may half-merge. So the
llvm-profdata is found by rustc's LLVM major and any other is refused.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from recipes.errors import CommandFailed, ToolchainError
from recipes.runner import capture


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
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
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
    rustc = env.get("RUSTC", "rustc")
    return parse_rustc_vv(capture([rustc, "-vV"], env=env))


def rustc_sysroot(env: Mapping[str, str]) -> Path:
    rustc = env.get("RUSTC", "rustc")
    return Path(capture([rustc, "--print", "sysroot"], env=env).strip())


def cargo_version(env: Mapping[str, str]) -> str:
    return capture(["cargo", "--version"], env=env).strip()


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


def profdata_version(path: Path, env: Mapping[str, str], hint: str = "give llvm-profdata") -> str:
    # `merge --version` works on every LLVM release; a bare `--version` does not on LLVM 14.
    return tool_version([str(path), "merge", "--version"], "llvm-profdata", hint, env)


def profdata_candidates(info: RustcInfo, sysroot: Path, search_path: str) -> list[Path]:
    """Where an llvm-profdata of rustc's LLVM may be, best first."""
    major = info.llvm_major
    candidates = [sysroot / "lib" / "rustlib" / info.host / "bin" / "llvm-profdata"]
    named = shutil.which(f"llvm-profdata-{major}", path=search_path)
    if named:
        candidates.append(Path(named))
    candidates.append(Path(f"/usr/lib/llvm-{major}/bin/llvm-profdata"))
    return candidates


def find_profdata(info: RustcInfo, sysroot: Path, env: Mapping[str, str], explicit: str | None) -> ProfdataTool:
    """The llvm-profdata to merge with: PGO_LLVM_PROFDATA if given, else one of rustc's LLVM major.

    Whatever is chosen must be of rustc's LLVM major version, or it is refused.
    """
    fix = (
        f"use rustc's own (`rustup component add llvm-tools`) or one of LLVM {info.llvm_major} "
        f"(Debian: `apt-get install llvm-{info.llvm_major}`)"
    )
    if explicit:
        path = Path(explicit)
        if not path.is_file() or not os.access(path, os.X_OK):
            found = shutil.which(explicit, path=env.get("PATH", os.defpath))
            if not found:
                raise ToolchainError(f"PGO_LLVM_PROFDATA={explicit}: no such program", fix)
            path = Path(found)
        tool = ProfdataTool(path, profdata_version(path, env, fix))
    else:
        existing = [p for p in profdata_candidates(info, sysroot, env.get("PATH", os.defpath)) if p.is_file()]
        if not existing:
            raise ToolchainError(f"no llvm-profdata of LLVM {info.llvm_major} (rustc {info.release}) found", fix)
        tool = ProfdataTool(existing[0], profdata_version(existing[0], env, fix))
    if tool.llvm_major != info.llvm_major:
        raise ToolchainError(
            f"{tool.path} is LLVM {tool.llvm_version} but rustc {info.release} is LLVM {info.llvm_version}: "
            f"it cannot read this rustc's raw profiles correctly",
            fix,
        )
    return tool
