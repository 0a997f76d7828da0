"""The environment of a reproducible build: a fixed set of variables, and the build machine's paths remapped
(``--remap-path-prefix``) to neutral ones."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from recipes.errors import ConfigError

#: what the build machine's paths become in the binary
SOURCE_PREFIX = "/build/src"
WORK_PREFIX = "/build/work"
CARGO_HOME_PREFIX = "/cargo"
SYSROOT_PREFIX = "/rustc/sysroot"

#: variables that would make the build depend on the terminal, the locale or the clock
_FIXED = {"LC_ALL": "C", "LANG": "C", "TZ": "UTC", "CARGO_TERM_COLOR": "never", "CARGO_TERM_PROGRESS_WHEN": "never"}
#: variables that would put two builds of two checkouts in one target dir
_DROPPED = ("CARGO_TARGET_DIR", "CARGO_BUILD_TARGET_DIR", "LANGUAGE")


def reproducible_env(base_env: Mapping[str, str], source_date_epoch: int) -> dict[str, str]:
    """A new environment: SOURCE_DATE_EPOCH set, no colour, the C locale, UTC, no shared target dir."""
    env = {k: v for k, v in base_env.items() if k not in _DROPPED and not k.startswith("LC_")}
    env.update(_FIXED)
    env["SOURCE_DATE_EPOCH"] = str(source_date_epoch)
    return env


def cargo_home(env: Mapping[str, str]) -> Path:
    return Path(env.get("CARGO_HOME") or Path(env.get("HOME", "~")).expanduser() / ".cargo")


#: each remapped path as a release manifest names it, and what it becomes (``{commit}``: rustc's commit hash), the
#: most general first: the manifest records these, not the build machine's paths, so that two checkouts at two paths
#: write the same manifest
SYSROOT_ROLE = "<rustc sysroot>"
RUST_SRC_ROLE = "<rustc sysroot>/lib/rustlib/src/rust"
CARGO_HOME_ROLE = "<cargo home>"
SOURCE_ROLE = "<checkout>"
WORK_ROLE = "<work dir>"
_REMAPPED = (
    (SYSROOT_ROLE, SYSROOT_PREFIX),
    (RUST_SRC_ROLE, "/rustc/{commit}"),
    (CARGO_HOME_ROLE, CARGO_HOME_PREFIX),
    (SOURCE_ROLE, SOURCE_PREFIX),
    (WORK_ROLE, WORK_PREFIX),
)


def remap_roles(rustc_commit: str) -> tuple[tuple[str, str], ...]:
    """``(what the path is, neutral path)`` of each remapped path, what a release manifest records of the
    remapping: the same for every checkout, work dir, cargo home and rustup home."""
    return tuple((role, neutral.format(commit=rustc_commit)) for role, neutral in _REMAPPED)


def remap_pairs(
    *, source_root: Path, work: Path, cargo_home: Path, sysroot: Path, rustc_commit: str
) -> list[tuple[str, str]]:
    """``(build machine path, neutral path)`` pairs, the most specific last (rustc lets the last match win).

    Each path is given as it is and resolved, when those differ, since cargo passes paths unresolved.
    """
    paths = {
        SYSROOT_ROLE: sysroot,
        RUST_SRC_ROLE: sysroot / "lib" / "rustlib" / "src" / "rust",
        CARGO_HOME_ROLE: cargo_home,
        SOURCE_ROLE: source_root,
        WORK_ROLE: work,
    }
    pairs: dict[str, str] = {}
    for role, neutral in remap_roles(rustc_commit):
        for form in (paths[role].absolute(), paths[role].resolve()):
            text = str(form)
            if any(ch.isspace() for ch in text):
                raise ConfigError(
                    f"{text} has white space in its path, which the rustflags variable cannot carry",
                    "build from a directory whose path has no spaces",
                )
            pairs[text] = neutral
    return sorted(pairs.items(), key=lambda kv: len(kv[0]))


def remap_flags(pairs: Iterable[tuple[str, str]]) -> list[str]:
    return [f"--remap-path-prefix={src}={dest}" for src, dest in pairs]


def without_remap(flags: Sequence[str]) -> list[str]:
    """The flags that do not depend on the build machine's paths (remap flags in the joined form only)."""
    if "--remap-path-prefix" in flags:
        raise ConfigError(
            "--remap-path-prefix is given as two words in the rustflags",
            "write it as --remap-path-prefix=FROM=TO, or leave it to the release session",
        )
    return [f for f in flags if not f.startswith("--remap-path-prefix=")]
