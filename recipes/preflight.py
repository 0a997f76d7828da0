"""Checks made when the plan is made, before anything is built or installed."""

from __future__ import annotations

from collections.abc import Mapping

from recipes import zig
from recipes.config import Config


def check(config: Config, env: Mapping[str, str], target: str) -> None:
    """Refuse, before any build or install, what can be known to fail from the configuration alone."""
    zig.check_target(config.cargo, target)
    zig.check_generate_linker(config.cargo, config.generate_linker)
