"""``cargo zigbuild``: the release's cargo command, its tools from PyPI, and what it cannot do.

cargo-zigbuild links with zig against the glibc named by the target's suffix
(``x86_64-unknown-linux-gnu.2.28``). Both come from PyPI (``cargo-zigbuild``, ``ziglang``): when they are
missing they are installed into the interpreter that runs nox, and cargo finds ``cargo-zigbuild`` through
that interpreter's scripts directory, cargo-zigbuild finds zig through ``python -m ziglang``.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from pathlib import Path

from recipes.errors import CommandFailed, ConfigError, ToolchainError
from recipes.runner import capture, run, say
from recipes.toolchain import emulation
from recipes.toolchain.rustc import split_toolchain
from recipes.toolchain.rustflags import glibc_suffix

#: what ``pip install`` gets when cargo-zigbuild or zig is missing (the versions this project was tested with)
REQUIREMENTS = ("cargo-zigbuild==0.24.1", "ziglang==0.17.1")
INSTALL_HINT = "pip install cargo-zigbuild ziglang"
#: C compilers that link for the machine's own architecture when called without a target
HOST_COMPILERS = frozenset({"cc", "gcc", "c++", "g++", "clang", "clang++"})


def uses_zigbuild(cargo: Sequence[str]) -> bool:
    """Whether the cargo command is ``cargo zigbuild`` (or ``cargo +toolchain zigbuild``)."""
    _, words = split_toolchain(cargo)
    return len(words) >= 2 and words[0] == "cargo" and words[1] == "zigbuild"


def check_target(cargo: Sequence[str], target: str) -> None:
    """A glibc suffix (``….2.28``) means nothing to plain cargo: refuse it before anything is built."""
    suffix = glibc_suffix(target)
    if suffix is not None and not uses_zigbuild(cargo):
        raise ConfigError(
            f"the target {target} has a glibc suffix (.{suffix}), which only cargo zigbuild understands, "
            f"and the cargo command is {' '.join(cargo)!r}",
            'set PGO_CARGO="cargo zigbuild", or drop the suffix',
        )


def check_generate_linker(cargo: Sequence[str], generate_linker: str | None, triple: str | None = None) -> None:
    """zig's linker driver rejects the ``-u __llvm_profile_runtime`` rustc passes for an instrumented link, so the
    instrumented binary needs another linker; for a target of another architecture than the machine's
    (``triple``), a cross linker: the machine's own C compiler would link aarch64 objects for x86_64."""
    arch = emulation.foreign(triple) if triple else None
    linker = arch.linker if arch else "cc"
    if uses_zigbuild(cargo) and not generate_linker:
        where = "the instrumented binary only runs on this machine"
        if arch:
            where = f"the instrumented {arch.name} binary runs under {arch.qemu} here"
        raise ConfigError(
            "cargo zigbuild cannot link the instrumented binary: zig's linker driver rejects the "
            "`-u __llvm_profile_runtime` of an instrumented link",
            f"set PGO_GENERATE_LINKER={linker} ({where})",
        )
    if arch and generate_linker and Path(generate_linker).name in HOST_COMPILERS:
        raise ConfigError(
            f"PGO_GENERATE_LINKER={generate_linker} links for {emulation.host_arch()}, not for {triple}",
            f"set PGO_GENERATE_LINKER={linker} (apt-get install -y {arch.linker_package} {arch.libc_package})",
        )


def scripts_dir() -> Path:
    """Where ``pip install`` puts the console scripts of the interpreter that runs nox."""
    return Path(sysconfig.get_path("scripts"))


def zigbuild_env(base_env: Mapping[str, str], *, scripts: Path, python: str) -> dict[str, str]:
    """A new environment in which cargo finds ``cargo-zigbuild`` and cargo-zigbuild finds zig.

    The interpreter's scripts directory goes last on PATH (a cargo-zigbuild already on PATH wins), and
    ``CARGO_ZIGBUILD_PYTHON_PATH`` names the interpreter whose ``-m ziglang`` is zig when no ``zig`` is on PATH.
    """
    env = dict(base_env)
    parts = [p for p in env.get("PATH", "").split(os.pathsep) if p]
    if str(scripts) not in parts:
        parts.append(str(scripts))
    env["PATH"] = os.pathsep.join(parts)
    env.setdefault("CARGO_ZIGBUILD_PYTHON_PATH", python)
    return env


def missing_tools(env: Mapping[str, str], python: str) -> list[str]:
    """The PyPI packages among cargo-zigbuild and ziglang that ``env`` cannot run."""
    missing = []
    if shutil.which("cargo-zigbuild", path=env.get("PATH", "")) is None:
        missing.append("cargo-zigbuild")
    if shutil.which("zig", path=env.get("PATH", "")) is None:
        try:
            capture([python, "-c", "import ziglang"], env=env)
        except (CommandFailed, ToolchainError):
            missing.append("ziglang")
    return missing


def ensure_zigbuild(
    base_env: Mapping[str, str], *, logs: Path, python: str = sys.executable, scripts: Path | None = None
) -> dict[str, str]:
    """The environment for ``cargo zigbuild``, installing cargo-zigbuild and zig from PyPI when missing."""
    scripts = scripts or scripts_dir()
    env = zigbuild_env(base_env, scripts=scripts, python=python)
    missing = missing_tools(env, python)
    if not missing:
        return env
    wanted = [r for r in REQUIREMENTS if r.split("==")[0] in missing]
    say(f"cargo zigbuild needs {' and '.join(missing)}: installing {' '.join(wanted)} into {python}")
    try:
        run(
            [python, "-m", "pip", "install", "--disable-pip-version-check", *wanted],
            env=env,
            log=logs / "install-zigbuild.log",
            what="pip install",
        )
    except (CommandFailed, ToolchainError) as exc:
        raise ToolchainError(
            f"PGO_CARGO='cargo zigbuild' needs {' and '.join(missing)}, and installing them failed ({exc.message})",
            f"{INSTALL_HINT} (into the Python that runs nox: {python})",
        ) from exc
    still = missing_tools(env, python)
    if still:
        raise ToolchainError(
            f"PGO_CARGO='cargo zigbuild' needs {' and '.join(still)}, not found after pip install",
            f"{INSTALL_HINT}, and put its scripts directory {scripts} on PATH",
        )
    return env


def versions(env: Mapping[str, str]) -> dict[str, str]:
    """The versions of cargo-zigbuild and of the zig it uses, for report.json."""
    zigbuild = capture(["cargo-zigbuild", "--version"], env=env).strip().split()[-1]
    if shutil.which("zig", path=env.get("PATH", "")):
        zig = capture(["zig", "version"], env=env).strip()
    else:
        zig = capture([env.get("CARGO_ZIGBUILD_PYTHON_PATH", sys.executable), "-m", "ziglang", "version"], env=env)
    return {"cargo_zigbuild": zigbuild, "zig": zig.strip()}


def cargo_test_argv(cargo: Sequence[str]) -> list[str]:
    """The command that runs the test suite the way ``cargo`` builds: ``cargo test`` or ``cargo-zigbuild test``."""
    plus, words = split_toolchain(cargo)
    if uses_zigbuild(cargo):
        return ["cargo-zigbuild", "test", *words[2:]]
    return ["cargo", *([f"+{plus}"] if plus else []), "test", *words[2:]]
