"""Where a clang of rustc's LLVM major can come from when none is installed.

A crate that pins an older Rust (rust-toolchain.toml: 1.93.0, LLVM 21) needs clang 21 for its C to get the
profile, and Debian 12 has no clang-21 package: ``apt-get install clang-21`` is no way out there. What is said
instead is what exists: the package when apt has it; else the clangs installed and the Rust toolchains whose LLVM
is one of theirs (``RUSTUP_TOOLCHAIN=<it>`` builds the crate with that toolchain, its C with that clang, as
docs/c-code.md does for such a crate); else ``PGO_CLANG`` or another toolchain.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from recipes.errors import PgoError
from recipes.runner import query
from recipes.toolchain.rustc import RustcInfo, parse_rustc_vv, rustc_sysroot

_CLANG_NAME = re.compile(r"^clang-(\d+)$")
_LLVM_DIR = re.compile(r"^llvm-(\d+)$")


def apt_has(package: str, env: Mapping[str, str]) -> bool | None:
    """Whether apt can install ``package`` (``apt-cache policy``: a candidate); None without apt-cache."""
    apt = shutil.which("apt-cache", path=env.get("PATH", os.defpath))
    if apt is None:
        return None
    done = query([apt, "policy", package], env=env)
    candidate = re.search(r"Candidate:\s*(\S+)", done.stdout)
    return candidate is not None and candidate.group(1) != "(none)"


def installed_clangs(env: Mapping[str, str], llvm_root: Path = Path("/usr/lib")) -> dict[int, Path]:
    """The clangs here by major: ``clang-<N>`` on PATH, else Debian's ``/usr/lib/llvm-<N>/bin/clang``."""
    found: dict[int, Path] = {}
    for directory in env.get("PATH", os.defpath).split(os.pathsep):
        folder = Path(directory or ".")
        names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        for name in names:
            match = _CLANG_NAME.match(name)
            if match and os.access(folder / name, os.X_OK):
                found.setdefault(int(match.group(1)), folder / name)
    dirs = sorted(p for p in llvm_root.iterdir() if _LLVM_DIR.match(p.name)) if llvm_root.is_dir() else []
    for llvm in dirs:
        if (llvm / "bin" / "clang").is_file():
            found.setdefault(int(llvm.name.split("-")[1]), llvm / "bin" / "clang")
    return found


def sibling_toolchains(sysroot: Path, env: Mapping[str, str]) -> dict[str, RustcInfo]:
    """The rustup toolchains beside ``sysroot`` (``<RUSTUP_HOME>/toolchains/<name>``) and what their rustc says;
    none when rustc is not rustup's, or a toolchain's rustc does not answer."""
    if sysroot.parent.name != "toolchains":
        return {}
    found: dict[str, RustcInfo] = {}
    for directory in sorted(sysroot.parent.iterdir()):
        rustc = directory / "bin" / "rustc"
        try:
            done = query([str(rustc), "-vV"], env=env) if rustc.is_file() else None
        except OSError:  # not a program (a half-installed toolchain): not a way out
            done = None
        if done is not None and done.returncode == 0 and "LLVM version" in done.stdout:
            found[directory.name] = parse_rustc_vv(done.stdout)
    return found


def route(
    rustc: RustcInfo, *, installable: bool | None, clangs: Mapping[int, Path], toolchains: Mapping[str, RustcInfo]
) -> str:
    """The way to a clang of ``rustc``'s LLVM, in words, from the facts: whether apt has ``clang-<major>`` (None:
    no apt), the clangs installed by major, the toolchains here and their rustc."""
    major = rustc.llvm_major
    if installable is not False:
        return f"apt-get install clang-{major}"
    matching = [(name, info) for name, info in toolchains.items() if info.llvm_major in clangs]
    matching.sort(key=lambda pair: pair[1].llvm_major, reverse=True)
    said = f"apt has no clang-{major} here"
    if matching:
        name, info = matching[0]
        return (
            f"{said}; clang-{info.llvm_major} is here ({clangs[info.llvm_major]}), of the LLVM of the toolchain "
            f"{name} (rustc {info.release}): RUSTUP_TOOLCHAIN={name} builds the crate with it, "
            f"or give PGO_CLANG=<a clang of LLVM {major}>"
        )
    installed = ", ".join(f"clang-{m}" for m in sorted(clangs, reverse=True))
    return (
        f"{said}"
        + (f", and no toolchain here is of the LLVM of {installed}" if installed else ", nor any clang")
        + f": give PGO_CLANG=<a clang of LLVM {major}>, or build with a Rust toolchain of an LLVM whose clang "
        "you can install"
    )


def clang_route(rustc: RustcInfo, env: Mapping[str, str]) -> str:
    """:func:`route` of what is on this machine (the toolchains asked only when apt has no clang of the major)."""
    installable = apt_has(f"clang-{rustc.llvm_major}", env)
    if installable is not False:
        return route(rustc, installable=installable, clangs={}, toolchains={})
    try:
        toolchains = sibling_toolchains(rustc_sysroot(env), env)
    except PgoError:  # no rustc to ask where its sysroot is: no toolchain to name
        toolchains = {}
    return route(rustc, installable=installable, clangs=installed_clangs(env), toolchains=toolchains)
