"""The demo server's whole pipeline, built ONCE per test session and shared by every e2e test.

``demo_pgo`` runs ``nox -s pgo`` from the repository root as a user would (no posargs: [tool.pgo] names the
demo server and its workload), at a small PGO_TRAIN_SCALE, with the work dir and the profile store in a
temporary directory and a target dir of the tests' own (so the optimised binary of the real crate does not
overwrite the developer's).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, assert_ok, clean_env, run_nox

#: small enough for the test budget, large enough that every phase sends real traffic
E2E_TRAIN_SCALE = "0.02"
#: the tests' own target dir for the optimised build (kept between sessions, so reruns are incremental)
E2E_TARGET_DIR = REPO / "target" / "tests-e2e-demo-server"


@dataclass(frozen=True)
class DemoPgo:
    """The result of one ``nox -s pgo`` of the demo server."""

    work: Path
    report: dict[str, Any]
    binary: Path
    output: str
    seconds: float


@pytest.fixture(scope="session")
def demo_pgo(tmp_path_factory: pytest.TempPathFactory) -> DemoPgo:
    root = tmp_path_factory.mktemp("demo-pgo")
    work, store = root / "work", root / "store"
    env = clean_env(
        {
            "PGO_OUT": str(work),
            "PGO_PROFILE_STORE": str(store),
            "PGO_TRAIN_SCALE": E2E_TRAIN_SCALE,
            "CARGO_TARGET_DIR": str(E2E_TARGET_DIR),
        }
    )
    started = time.monotonic()
    proc = run_nox("pgo", env, timeout=1800)
    text = assert_ok(proc)
    report = json.loads((work / "report.json").read_text())
    binary = Path(report["optimise"]["binary"])
    assert binary.is_file(), text[-3000:]
    return DemoPgo(work, report, binary, text, time.monotonic() - started)
