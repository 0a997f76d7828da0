"""The demo server's whole pipeline, built ONCE per test session and shared by every e2e test.

``demo_pgo`` runs ``nox -s pgo`` from the repository root as a user would (no posargs: [tool.pgo] names the
demo server and its workload), at a small PGO_TRAIN_SCALE, with the work dir, the profile store and the target
dir of the optimised build in a directory of its own (so the developer's target/ is untouched, and two test
sessions at once do not clean each other's builds). That directory is made with tempfile, not pytest's
numbered tmp dirs, which another pytest session may delete while this one still builds; it is removed when
the session ends.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_ok, clean_env, run_nox

#: small enough for the test budget, large enough that every phase sends real traffic
E2E_TRAIN_SCALE = "0.02"


@dataclass(frozen=True)
class DemoPgo:
    """The result of one ``nox -s pgo`` of the demo server."""

    work: Path
    report: dict[str, Any]
    binary: Path
    output: str
    seconds: float


@pytest.fixture(scope="session")
def demo_pgo() -> Iterator[DemoPgo]:
    root = Path(tempfile.mkdtemp(prefix="pgo-e2e-demo-server-"))
    work, store = root / "work", root / "store"
    env = clean_env(
        {
            "PGO_OUT": str(work),
            "PGO_PROFILE_STORE": str(store),
            "PGO_TRAIN_SCALE": E2E_TRAIN_SCALE,
            "CARGO_TARGET_DIR": str(root / "target"),
            "PGO_BOLT": "1",  # and the bolt stage at this small scale (tests/e2e/test_demo_pgo.py)
        }
    )
    try:
        started = time.monotonic()
        proc = run_nox("pgo", env, timeout=2400)
        text = assert_ok(proc)
        report = json.loads((work / "report.json").read_text())
        binary = Path(report["optimise"]["binary"])
        assert binary.is_file(), text[-3000:]
        yield DemoPgo(work, report, binary, text, time.monotonic() - started)
    finally:
        shutil.rmtree(root, ignore_errors=True)
