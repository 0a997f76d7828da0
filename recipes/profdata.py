"""llvm-profdata: merge raw profiles, count what the training executed."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from recipes.errors import MissingInput, ToolchainError
from recipes.runner import run
from recipes.toolchain import ProfdataTool


@dataclass(frozen=True)
class ProfileSummary:
    total_functions: int
    executed_functions: int


_TOTAL = re.compile(r"^Total functions:\s*(\d+)", re.MULTILINE)
_EXECUTED = re.compile(r"^Number of functions with maximum count \(>= 1\):\s*(\d+)", re.MULTILINE)


def parse_show(text: str) -> ProfileSummary:
    """Parse ``llvm-profdata show --value-cutoff=1``: total functions and those executed at least once."""
    total = _TOTAL.search(text)
    executed = _EXECUTED.search(text)
    if not total:
        raise ToolchainError("llvm-profdata show printed no 'Total functions' line", "is the profile empty?")
    return ProfileSummary(int(total.group(1)), int(executed.group(1)) if executed else 0)


_OVERLAP = re.compile(r"^\s*Edge profile overlap:\s*([\d.]+)%", re.MULTILINE)


def parse_overlap(text: str) -> float:
    """The edge-count overlap, in percent, of ``llvm-profdata overlap``."""
    match = _OVERLAP.search(text)
    if not match:
        raise ToolchainError("llvm-profdata overlap printed no 'Edge profile overlap' line", "see its log")
    return float(match.group(1))


def merge(tool: ProfdataTool, profraw_dir: Path, output: Path, *, env: Mapping[str, str], log: Path) -> None:
    """Merge every .profraw of ``profraw_dir`` into ``output``, atomically."""
    raws = sorted(profraw_dir.glob("*.profraw")) if profraw_dir.is_dir() else []
    if not raws:
        raise MissingInput(f"no .profraw files in {profraw_dir}", "run `nox -s train` first")
    tmp = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    try:
        run(
            [str(tool.path), "merge", "--failure-mode=all", "-o", str(tmp), *map(str, raws)],
            env=env,
            log=log,
            what="llvm-profdata merge",
        )
        os.replace(tmp, output)
    finally:
        tmp.unlink(missing_ok=True)


def summarise(tool: ProfdataTool, profile: Path, *, env: Mapping[str, str], log: Path) -> ProfileSummary:
    done = run([str(tool.path), "show", "--value-cutoff=1", str(profile)], env=env, log=log, what="llvm-profdata show")
    return parse_show(done.output())


def overlap(tool: ProfdataTool, first: Path, second: Path, *, env: Mapping[str, str], log: Path) -> float:
    done = run([str(tool.path), "overlap", str(first), str(second)], env=env, log=log, what="llvm-profdata overlap")
    return parse_overlap(done.output())
