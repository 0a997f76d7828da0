"""Fixtures the integration tests share."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, clean_env


@pytest.fixture(scope="session")
def bare_server(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain release build of tests/fixtures/bare-server (std only, no SIGTERM handler), built once."""
    target = tmp_path_factory.mktemp("bare-server-target")
    argv = ["cargo", "build", "--release", "--locked", "--manifest-path", str(FIXTURES / "bare-server" / "Cargo.toml")]
    proc = subprocess.run(
        argv, env=clean_env({"CARGO_TARGET_DIR": str(target)}), capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return target / "release" / "bare-server"
