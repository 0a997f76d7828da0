"""The cargo command of a build (both builds use the same one) and the environment it runs in."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from recipes.files import atomic_output
from recipes.toolchain.cargo.metadata import CrateInfo


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
    message_format: str | None = None,
) -> list[str]:
    """The cargo command of a build. Both builds use the same one, only the target dir may differ.

    ``-v`` puts every rustc line in the log; ``-vv`` also replays the warnings of dependencies that are Fresh.
    ``message_format`` (say :data:`MESSAGE_FORMAT`) adds cargo's JSON messages to the log, one a line
    (:func:`recipes.toolchain.cargo.log.compiler_artifacts`); every parser of the log reads it with or without them.
    """
    words = list(cargo)
    if subcommand is not None:  # the word after cargo and its +toolchain
        words[2 if words[1].startswith("+") else 1] = subcommand
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
    if message_format is not None:
        argv.append(f"--message-format={message_format}")
    return argv


#: JSON artefact messages on stdout, the compiler's diagnostics still rendered as text on stderr: the log keeps
#: its text (warnings, ``Running`` lines) and gains what was built, where, by which package and target.
MESSAGE_FORMAT = "json-render-diagnostics"


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


def install_script(script: Path, text: str) -> Path:
    """``script``, an executable of ``text``, written when it is not there as it should be."""
    if not script.is_file() or script.read_text(encoding="utf-8") != text:
        with atomic_output(script) as tmp:
            tmp.write_text(text, encoding="utf-8")
            tmp.chmod(0o755)
    return script


def with_lint_wrapper(base_env: Mapping[str, str], bin_dir: Path) -> dict[str, str]:
    """A new environment whose RUSTC_WRAPPER is :data:`LINT_WRAPPER` (chaining the caller's own wrapper)."""
    script = install_script(bin_dir / "rustc-cap-lints-warn", LINT_WRAPPER)
    env = dict(base_env)
    inner = env.pop("RUSTC_WRAPPER", "")
    if inner:
        env["RECIPES_INNER_RUSTC_WRAPPER"] = inner
    env["RUSTC_WRAPPER"] = str(script)
    return env


def cargo_env(base_env: Mapping[str, str]) -> dict[str, str]:
    """Colour and progress off, so that logs parse and nothing hashed depends on the terminal."""
    return {**base_env, "CARGO_TERM_COLOR": "never", "CARGO_TERM_PROGRESS_WHEN": "never"}
