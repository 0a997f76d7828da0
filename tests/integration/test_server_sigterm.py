"""A server with no SIGTERM handler (like many small ones): killed by the training's SIGTERM it writes no
profile, and the refusal says so; with ``exit_on_sigterm = true`` the training makes SIGTERM call exit(0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REPO, Pipeline, assert_ok, assert_refused

pytestmark = [pytest.mark.slow, pytest.mark.server]


def test_a_server_without_a_sigterm_handler_is_trained_with_exit_on_sigterm(tmp_path: Path) -> None:
    server = Pipeline(tmp_path, "bare-server")
    assert_ok(server.nox("pgo", PGO_TRAIN_SCALE="0.5"))
    report = json.loads((server.work / "report.json").read_text())
    assert report["train"]["profraw_files"] == 1
    assert report["merge"]["executed_functions"] >= 20
    assert report["optimise"]["main_crate_functions_with_profile"] > 0
    assert report["optimise"]["verify"]["requests"] == report["train"]["requests"]


@pytest.mark.refuses("server-exits-non-zero-signal-after-sigterm")
def test_without_exit_on_sigterm_the_refusal_names_the_setting(tmp_path: Path) -> None:
    workload = tmp_path / "no-shim.toml"
    text = (REPO / "profiles" / "bare-server.toml").read_text()
    assert "exit_on_sigterm = true\n" in text
    workload.write_text(text.replace("exit_on_sigterm = true\n", ""))
    server = Pipeline(tmp_path, "bare-server", workload=str(workload))
    assert_ok(server.nox("instrument"))
    line = assert_refused(
        server.nox("train", PGO_TRAIN_SCALE="0.1"), "signal 15 (SIGTERM) after SIGTERM", "no SIGTERM handler"
    )
    assert "set exit_on_sigterm = true" in line
