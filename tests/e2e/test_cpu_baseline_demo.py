"""The demo server's optimised binary (built once per session by ``demo_pgo``) under an SSE2-only CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import assert_ok, clean_env, run_nox
from tests.e2e.conftest import DemoPgo

pytestmark = [pytest.mark.slow, pytest.mark.server]


def test_demo_server_passes_the_baseline_cpu_check(demo_pgo: DemoPgo, tmp_path: Path) -> None:
    assert demo_pgo.report["optimise"]["target_cpu"] is None
    env = clean_env({"PGO_OUT": str(tmp_path / "work")})
    text = assert_ok(run_nox("cpu-baseline", env, ["--binary", str(demo_pgo.binary)], timeout=600))
    assert "target features: fxsr,sse,sse2 (rustc's defaults)" in text
    assert (
        "served: HTTP/1.1: 3 x 200; HTTP/2 (h2c): 3 x 200; HTTP/2 over TLS: 3 x 200; HTTP/1.1 over TLS: 3 x 200; "
        "SIGTERM: exit code 0"
    ) in text
    assert "avx2 killed by SIGILL (illegal instruction) (max: exit code 0)" in text
    # --binary: the check leaves the demo_pgo work dir's report alone (read again: demo_pgo.report is from before)
    assert "cpu_baseline" not in json.loads((demo_pgo.work / "report.json").read_text())
