"""What cargo says that matters to a reproducible build: path packages outside the workspace (from
``cargo metadata``), and which units were compiled or fresh (from its ``-v`` log)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

# --- cargo metadata: packages whose identity depends on where the source is ---------------------


def outside_workspace(metadata: Mapping[str, object]) -> list[str]:
    """``"name (manifest path)"`` of the path packages outside the workspace root, from ``cargo metadata``.

    Cargo hashes a path package's location relative to the workspace root into its ``-C metadata``, but
    the absolute location when it is outside the root: its crate identity then depends on the checkout's path.
    """
    root = Path(str(metadata["workspace_root"]))
    packages = metadata.get("packages", [])
    listed = packages if isinstance(packages, list) else []
    manifests = [(p, Path(str(p["manifest_path"]))) for p in listed if p.get("source") is None]
    return sorted(f"{p['name']} ({manifest})" for p, manifest in manifests if not manifest.is_relative_to(root))


# --- cargo's -v log: which units were compiled, which were fresh ---------------------------------

_UNIT = re.compile(r"^\s+(?P<state>Compiling|Fresh) (?P<name>\S+) v(?P<version>\S+)")


def unit_states(log_text: str) -> dict[str, str]:
    """``{package: "Compiling" | "Fresh"}`` from cargo's ``-v`` output (its status lines)."""
    return {m.group("name"): m.group("state") for line in log_text.splitlines() if (m := _UNIT.match(line))}
