"""Cargo: what the crate is, the build command of both builds, and what its ``-v`` log says."""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from recipes.errors import ConfigError, MissingInput
from recipes.runner import capture


@dataclass(frozen=True)
class CrateInfo:
    """The package and binary to build, as ``cargo metadata`` describes them."""

    manifest: Path
    package: str
    package_dir: Path
    bin: str
    crate_names: tuple[str, ...]  # the rustc crate names of the package's lib and the bin
    target_directory: Path


def crate_info(manifest: Path, package: str | None, bin_name: str | None, env: Mapping[str, str]) -> CrateInfo:
    if not manifest.is_file():
        raise MissingInput(f"no Cargo.toml at {manifest}", "set PGO_MANIFEST or [tool.pgo] manifest")
    text = capture(
        ["cargo", "metadata", "--format-version", "1", "--no-deps", "--manifest-path", str(manifest)],
        env=env,
        cwd=manifest.parent,
    )
    meta = json.loads(text)
    packages = meta["packages"]
    if package is None:
        own = [p for p in packages if Path(p["manifest_path"]) == manifest]
        if len(own) != 1:
            names = ", ".join(p["name"] for p in packages)
            raise ConfigError(f"{manifest} is a workspace: which package?", f"set PGO_PACKAGE to one of {names}")
        chosen = own[0]
    else:
        matches = [p for p in packages if p["name"] == package]
        if not matches:
            names = ", ".join(p["name"] for p in packages)
            raise ConfigError(f"no package {package!r} in {manifest}", f"known packages: {names}")
        chosen = matches[0]
    bins = [t["name"] for t in chosen["targets"] if "bin" in t["kind"]]
    libs = [t["name"] for t in chosen["targets"] if "lib" in t["kind"] or "rlib" in t["kind"]]
    if bin_name is None:
        if len(bins) != 1:
            raise ConfigError(
                f"package {chosen['name']} has {len(bins)} binaries" + (f" ({', '.join(bins)})" if bins else ""),
                "set PGO_BIN to the one to build",
            )
        bin_name = bins[0]
    elif bin_name not in bins:
        raise ConfigError(
            f"package {chosen['name']} has no binary {bin_name!r}", f"its binaries: {', '.join(bins) or 'none'}"
        )
    crate_names = tuple(name.replace("-", "_") for name in (*libs, bin_name))
    return CrateInfo(
        manifest=manifest,
        package=chosen["name"],
        package_dir=Path(chosen["manifest_path"]).parent,
        bin=bin_name,
        crate_names=crate_names,
        target_directory=Path(meta["target_directory"]),
    )


def build_argv(
    cargo: Sequence[str],
    *,
    crate: CrateInfo,
    target: str,
    features: Sequence[str],
    locked: bool,
    target_dir: Path | None,
    subcommand: str | None = None,
    verbose: str = "-v",
) -> list[str]:
    """The cargo command of a build. Both builds use the same one, only the target dir may differ.

    ``-v`` puts every rustc line in the log; ``-vv`` also replays the warnings of dependencies that are Fresh.
    """
    words = list(cargo)
    if subcommand is not None:
        words[1] = subcommand
    argv = [*words, "--release", "--target", target, "--manifest-path", str(crate.manifest), "-p", crate.package]
    if subcommand is None:
        argv += ["--bin", crate.bin]
    if features:
        argv += ["--features", ",".join(features)]
    if locked:
        argv.append("--locked")
    if target_dir is not None:
        argv += ["--target-dir", str(target_dir)]
    argv += [verbose, "--color", "never"]
    return argv


#: A RUSTC_WRAPPER that turns cargo's ``--cap-lints allow`` (given to registry dependencies) into ``warn``.
#: The cap also silences LLVM's missing- and stale-profile warnings, so without it those checks would see only
#: the package's own crates. Lint levels do not change code generation: the binary is the same either way.
LINT_WRAPPER = """#!/bin/sh
# Written by pgo-recipes: --cap-lints allow -> warn, so the dependencies' profile warnings reach the log.
prev=""
for arg do
  shift
  if [ "$prev" = "--cap-lints" ] && [ "$arg" = "allow" ]; then set -- "$@" warn; else set -- "$@" "$arg"; fi
  prev=$arg
done
if [ -n "${RECIPES_INNER_RUSTC_WRAPPER:-}" ]; then exec "$RECIPES_INNER_RUSTC_WRAPPER" "$@"; fi
exec "$@"
"""


def with_lint_wrapper(base_env: Mapping[str, str], bin_dir: Path) -> dict[str, str]:
    """A new environment whose RUSTC_WRAPPER is :data:`LINT_WRAPPER` (chaining the caller's own wrapper)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "rustc-cap-lints-warn"
    if not script.is_file() or script.read_text(encoding="utf-8") != LINT_WRAPPER:
        tmp = script.with_name(f".{script.name}.{os.getpid()}.tmp")
        tmp.write_text(LINT_WRAPPER, encoding="utf-8")
        tmp.chmod(0o755)
        os.replace(tmp, script)
    env = dict(base_env)
    inner = env.pop("RUSTC_WRAPPER", "")
    if inner:
        env["RECIPES_INNER_RUSTC_WRAPPER"] = inner
    env["RUSTC_WRAPPER"] = str(script)
    return env


def cargo_env(base_env: Mapping[str, str]) -> dict[str, str]:
    """Colour and progress off, so that logs parse and nothing hashed depends on the terminal."""
    env = dict(base_env)
    env["CARGO_TERM_COLOR"] = "never"
    env["CARGO_TERM_PROGRESS_WHEN"] = "never"
    return env


@dataclass(frozen=True)
class RustcCall:
    """One rustc command line of a ``cargo -v`` log."""

    crate_name: str
    crate_types: tuple[str, ...]
    argv: tuple[str, ...]

    def codegen(self, option: str) -> str | None:
        """The value of ``-C <option>=…`` (either spelling) on this line, the last one winning."""
        value = None
        previous = ""
        for arg in self.argv:
            text = arg[2:] if arg.startswith("-C") and len(arg) > 2 else (arg if previous == "-C" else "")
            if text.startswith(option + "="):
                value = text.split("=", 1)[1]
            previous = arg
        return value

    @property
    def metadata(self) -> str | None:
        return self.codegen("metadata")

    @property
    def target(self) -> str | None:
        if "--target" in self.argv:
            index = self.argv.index("--target")
            return self.argv[index + 1] if index + 1 < len(self.argv) else None
        return None


_RUNNING = re.compile(r"^\s*Running `(?P<cmd>.*)`\s*$")


def rustc_calls(log_text: str) -> list[RustcCall]:
    """Every rustc invocation in a ``cargo build -v`` log."""
    calls = []
    for line in log_text.splitlines():
        match = _RUNNING.match(line)
        if not match:
            continue
        try:
            argv = shlex.split(match.group("cmd"))
        except ValueError:
            continue
        if "--crate-name" not in argv:
            continue
        index = argv.index("--crate-name")
        types = tuple(argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--crate-type")
        calls.append(RustcCall(argv[index + 1], types, tuple(argv)))
    return calls


def main_crate_calls(log_text: str, crate: CrateInfo) -> list[RustcCall]:
    """The rustc lines of the package's own lib and bin for the target (not its build script)."""
    own_types = {"bin", "lib", "rlib"}
    return [
        call
        for call in rustc_calls(log_text)
        if call.crate_name in crate.crate_names and call.target is not None and own_types & set(call.crate_types)
    ]


def crate_identities(log_text: str, crate: CrateInfo) -> dict[str, str]:
    """``{"<crate name> (<type>)": <-C metadata>}`` of the package's own crates in a build log."""
    return {
        f"{call.crate_name} ({','.join(call.crate_types)})": call.metadata or "none"
        for call in main_crate_calls(log_text, crate)
    }


def main_bin_call(log_text: str, crate: CrateInfo) -> RustcCall:
    """The rustc line that compiled the binary; its absence means the package was not rebuilt."""
    bin_crate = crate.bin.replace("-", "_")
    calls = [c for c in rustc_calls(log_text) if c.crate_name == bin_crate and "bin" in c.crate_types]
    if not calls:
        raise MissingInput(
            f"the cargo log has no rustc line for the binary {crate.bin}",
            "the package was not recompiled: the pipeline cleans it first, so this is a bug",
        )
    return calls[-1]


@dataclass(frozen=True)
class ProfileWarnings:
    """What the optimised build's LLVM said about the profile."""

    missing: int
    stale: int
    missing_by_crate: dict[str, int]
    stale_by_crate: dict[str, int]
    stale_examples: tuple[str, ...]


_WARNING = re.compile(r"^warning: (?P<cgu>[^\s:]+): (?P<text>.*)$")
MISSING_TEXT = "no profile data available for function"
STALE_TEXTS = (
    "function control flow change detected (hash mismatch)",
    "hash mismatch",
    "profile data may be out of date",
)


def profile_warnings(log_text: str) -> ProfileWarnings:
    """Count ``-pgo-warn-missing-function`` and stale-profile warnings, per crate (from the CGU name)."""
    missing = 0
    stale = 0
    missing_by: dict[str, int] = {}
    stale_by: dict[str, int] = {}
    examples: list[str] = []
    for line in log_text.splitlines():
        match = _WARNING.match(line)
        if not match:
            continue
        text = match.group("text")
        crate = match.group("cgu").split(".")[0]
        if MISSING_TEXT in text:
            missing += 1
            missing_by[crate] = missing_by.get(crate, 0) + 1
        elif any(s in text.lower() for s in STALE_TEXTS):
            stale += 1
            stale_by[crate] = stale_by.get(crate, 0) + 1
            if len(examples) < 3:
                examples.append(line.strip())
    return ProfileWarnings(missing, stale, missing_by, stale_by, tuple(examples))
