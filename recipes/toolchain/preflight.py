"""Checks made when the plan is made, before anything is built or installed."""

from __future__ import annotations

import difflib
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from recipes.config import Config
from recipes.errors import ConfigError
from recipes.llvm import boltlib as bolt
from recipes.runner import capture, query
from recipes.store import ProfileStore
from recipes.toolchain import emulation, zig
from recipes.toolchain.rustc import RustcInfo, find_profdata, rustc_sysroot
from recipes.toolchain.rustflags import RustflagsPlan, cargo_config_files, rust_triple


def check(
    config: Config, env: Mapping[str, str], target: str, bin_name: str | None = None, *, instruments: bool = True
) -> None:
    """Refuse, before any build or install, what can be known to fail from the configuration alone.

    ``instruments``: the session builds the instrumented binary (cargo zigbuild then needs a generate linker).
    ``bin_name`` is the crate's binary, for the default store ``/tmp/<bin>-pgo``; without it (and without
    ``PGO_BIN``) only a configured ``PGO_PROFILE_STORE`` is checked here.
    """
    zig.check_target(config.cargo, target)
    if instruments:
        zig.check_generate_linker(config.cargo, config.generate_linker, rust_triple(target))
        check_linker_found(config.generate_linker, env)
    check_target_triple(target, env)
    check_target_installed(target, env, config)
    root = store_root(config, bin_name or config.bin)
    if root is not None:
        ProfileStore(root).check()  # owner, mode, not a symlink, parents: checked without creating anything
        check_apart(config.out, root)


def check_linker_found(linker: str | None, env: Mapping[str, str]) -> None:
    """``PGO_GENERATE_LINKER`` names a program rustc can run: a name on PATH, or an absolute path to an executable
    file (a relative path is rustc's to resolve, from where cargo runs it). Else the instrumented build would fail
    at its link, after ``cargo clean`` and a compile, with rustc's ``linker `…` not found``."""
    if not linker or ("/" in linker and not Path(linker).is_absolute()):
        return
    if shutil.which(linker, path=env.get("PATH", os.defpath)) is None:
        raise ConfigError(
            f"PGO_GENERATE_LINKER={linker}: no such program, and the instrumented build links with it",
            "give the linker's name on PATH or its absolute path (cc, or the cross compiler for another target), "
            "or unset PGO_GENERATE_LINKER",
        )


def check_tools(config: Config, env: Mapping[str, str], rustc: RustcInfo, *, profdata: bool, bolt_tools: bool) -> None:
    """The LLVM tools the session will run, found and of rustc's LLVM major, before anything is built: an
    llvm-profdata of another major or a program that is none (``PGO_LLVM_PROFDATA``) would otherwise be refused
    only after the instrumented build and the training; llvm-bolt and merge-fdata (``PGO_LLVM_BOLT``) and
    ``PGO_BOLT_ARGS`` only after the optimised build."""
    if profdata:
        find_profdata(rustc, rustc_sysroot(env), env, config.llvm_profdata)
    if bolt_tools:
        bolt.find_bolt(rustc, env, config.llvm_bolt)
        bolt.bolt_args(config.bolt_args)


def check_bolt_target(target: str, *, bolt: bool) -> None:
    """``PGO_BOLT=1`` only for x86_64: the stage's checks and its runtime are tried on x86_64 binaries only."""
    arch = emulation.triple_arch(rust_triple(target))
    if bolt and arch != "x86_64":
        # llvm-bolt reads and writes AArch64, but BOLT's profile comes from its instrumentation runtime, which an
        # x86_64 machine's bolt-22 has for x86_64 only ("linking object with arch x86_64 into context with arch
        # aarch64", tried on hello), and perf's branch records need an arm machine
        runtime = (
            f"; llvm-bolt's instrumentation runtime on this {emulation.host_arch()} machine is of its own architecture"
            if emulation.foreign(rust_triple(target))
            else ""
        )
        raise ConfigError(
            f"PGO_BOLT=1 is not supported for {arch} (PGO_TARGET={target}): the BOLT stage is checked on x86_64 only"
            + runtime,
            "unset PGO_BOLT for this target",
        )


def store_root(config: Config, bin_name: str | None) -> Path | None:
    """The profile store the plan will use: ``PGO_PROFILE_STORE``, else ``/tmp/<bin>-pgo`` (None: not known yet)."""
    if config.store is not None:
        return config.store
    return Path("/tmp") / f"{bin_name}-pgo" if bin_name else None


def check_apart(work: Path, store: Path) -> None:
    """The work dir and the profile store must not hold one another (as written, nor as symlinks resolve them):
    every stage rewrites the work dir, and the store must hold only the profiles whose names it checks."""
    for out, root in ((work, store), (Path(os.path.realpath(work)), Path(os.path.realpath(store)))):
        if out == root:
            where = f"the work dir PGO_OUT={work} is the profile store {store}"
        elif out.is_relative_to(root):
            where = f"the work dir PGO_OUT={work} is inside the profile store {store}"
        elif root.is_relative_to(out):
            where = f"the profile store {store} is inside the work dir PGO_OUT={work}"
        else:
            continue
        raise ConfigError(
            where + ("" if (out, root) == (work, store) else f" (as symlinks resolve them: {out} and {root})"),
            "give PGO_OUT and PGO_PROFILE_STORE paths outside one another",
        )


def target_list(env: Mapping[str, str]) -> list[str]:
    """The triples this rustc knows (``rustc --print target-list``)."""
    return capture([env.get("RUSTC", "rustc"), "--print", "target-list"], env=env).split()


def _custom_target(triple: str, env: Mapping[str, str]) -> bool:
    """A target spec file: a path ending in .json, or ``<triple>.json`` in a directory of RUST_TARGET_PATH."""
    return triple.endswith(".json") or any(
        (Path(directory) / f"{triple}.json").is_file()
        for directory in env.get("RUST_TARGET_PATH", "").split(os.pathsep)
        if directory
    )


def check_target_triple(target: str, env: Mapping[str, str], *, source: str = "PGO_TARGET") -> None:
    """The target (without a zigbuild glibc suffix) must be one this rustc knows; ``source``: where it was given
    (``--target`` of a release of several targets)."""
    triple = rust_triple(target)
    if _custom_target(triple, env):
        return
    known = target_list(env)
    if triple in known:
        return
    # a misspelt triple with a glibc suffix (x86_64-unknown-linux-gun.2.28): suggest the triple with the suffix
    suffix = re.search(r"\.\d+\.\d+$", triple)
    bare = triple[: suffix.start()] if suffix else triple
    nearest = difflib.get_close_matches(bare, known, n=1, cutoff=0.0)
    suggestion = ""
    if nearest:
        with_suffix = nearest[0] + suffix.group() if suffix else nearest[0]
        suggestion = f"did you mean {with_suffix if rust_triple(with_suffix) == nearest[0] else nearest[0]}? "
    what = f"{source}={target}" + (f" ({triple} without its glibc suffix)" if triple != target else "")
    raise ConfigError(
        f"{what} is not a target this rustc knows",
        f"{suggestion}see `rustc --print target-list` for the valid triples",
    )


def check_target_installed(target: str, env: Mapping[str, str], config: Config, *, source: str = "PGO_TARGET") -> None:
    """The target's standard library is installed beside this rustc (``rustc --print target-libdir``); else every
    build would fail at its first crate with ``can't find crate for `core```, after ``cargo clean``, as
    "instrumented build failed (see log)". A target spec file, and a cargo that builds std itself, are let be;
    ``source``: where the target was given (``--target`` of a release of several)."""
    triple = rust_triple(target)
    if _custom_target(triple, env):
        return
    libdir = Path(capture([env.get("RUSTC", "rustc"), "--print", "target-libdir", "--target", triple], env=env).strip())
    names = [p.name for p in libdir.iterdir()] if libdir.is_dir() else []
    refusal = std_missing(target, libdir, names, env.get("RUSTUP_TOOLCHAIN"), source=source)
    if refusal is not None and not builds_std(config, env):
        raise refusal


def std_missing(
    target: str, libdir: Path, names: Sequence[str], toolchain: str | None, *, source: str = "PGO_TARGET"
) -> ConfigError | None:
    """The refusal of a target whose standard library is not in ``libdir`` (its files ``names``: no
    ``libcore-*.rlib``), naming what installs it: rustup's ``target add`` for the toolchain, else the rust-std of
    this rustc; None when it is there."""
    if any(name.startswith("libcore-") and name.endswith(".rlib") for name in names):
        return None
    triple = rust_triple(target)
    where = f"{source}={target}" + (f" ({triple})" if triple != target else "")
    whose = f"the toolchain {toolchain}" if toolchain else "this rustc"
    fix = (
        f"install it: rustup target add --toolchain {toolchain} {triple}"
        if toolchain
        else f"install the rust-std component for {triple} into this rustc's sysroot, or use rustup's rustc"
    )
    missing = "no such directory" if not names else "no libcore-*.rlib there"
    return ConfigError(
        f"{where}: the standard library for {triple} is not installed in {whose} ({libdir}: {missing}), "
        "and every build needs it",
        fix,
    )


def builds_std(config: Config, env: Mapping[str, str]) -> bool:
    """Cargo builds the standard library itself: ``-Zbuild-std`` in PGO_CARGO, ``CARGO_UNSTABLE_BUILD_STD``, or
    ``[unstable] build-std`` in a cargo config."""
    if any(word.startswith(("-Zbuild-std", "build-std")) for word in config.cargo) or env.get(
        "CARGO_UNSTABLE_BUILD_STD"
    ):
        return True
    for file in cargo_config_files(config.manifest.parent, env):
        unstable = file.data.get("unstable")
        if isinstance(unstable, dict) and unstable.get("build-std"):
            return True
    return False


def check_rustflags(flags: RustflagsPlan, triple: str, env: Mapping[str, str], cwd: Path) -> None:
    """The flags every build gets, each source's, are flags this rustc takes (``rustc <flags> --print sysroot``,
    which parses ``-Cllvm-args`` too): else cargo's first question to rustc fails, and the session with it, as
    "cargo clean failed", its log saying why."""
    existing = tuple(env.get(flags.var, "").split())
    groups = (
        (flags.var, existing),
        ("; ".join(flags.carried_from), flags.base[len(existing) :]),
        (f"[target.{triple}] rustflags of the cargo config", flags.config_target_flags),
    )
    for where, given in groups:
        if not given:
            continue
        done = query([env.get("RUSTC", "rustc"), *given, "--print", "sysroot", "--target", triple], env=env, cwd=cwd)
        if done.returncode != 0:
            raise rustflags_refused(where, done.stderr)


_UNKNOWN_LLVM = re.compile(r"Unknown command line argument '([^']+)'")
_MEANT = re.compile(r"Did you mean '([^']+)'")


def rustflags_refused(where: str, stderr: str) -> ConfigError:
    """The refusal of flags rustc will not take, from what it said: an LLVM option it does not know named, with
    LLVM's guess; else rustc's first error."""
    hint = "fix or remove it: every build would fail at its first step"
    if unknown := _UNKNOWN_LLVM.search(stderr):
        meant = _MEANT.search(stderr)
        return ConfigError(
            f"{where}: LLVM has no option {unknown.group(1)} (-Cllvm-args={unknown.group(1)})",
            (f"did you mean {meant.group(1)}? " if meant else "") + hint + " (rustc -Cllvm-args=--help lists them)",
        )
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    error = next((line for line in lines if line.startswith("error")), lines[0] if lines else "no output")
    said = re.sub(r"^error:\s*", "", error)
    return ConfigError(f"{where}: rustc refuses these flags: {said}", hint)
