"""``nox -s pgo`` with no arguments: build, train and verify the demo server (one build per session)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from recipes.workload import load_workload
from tests.conftest import REPO
from tests.e2e.conftest import E2E_TRAIN_SCALE, DemoPgo

pytestmark = [pytest.mark.slow, pytest.mark.server]


def test_pgo_trains_every_phase_of_both_instances(demo_pgo: DemoPgo) -> None:
    train = demo_pgo.report["train"]
    workload = load_workload(REPO / "profiles" / "demo-server.toml")
    names = [(i.name, p.name) for i in workload.instances for p in i.phases]
    assert len(train["phases"]) == len(names)
    for phase in train["phases"]:
        assert phase["done"] == phase["requests"] >= 1, phase
        assert sum(phase["status"].values()) == phase["requests"], phase
    assert train["profraw_files"] == 2  # one per instance
    assert train["scale"] == float(E2E_TRAIN_SCALE)
    by_name = {p["name"]: p for p in train["phases"]}
    assert by_name["upstream-dead"]["status"]["5xx"] == by_name["upstream-dead"]["requests"]
    assert by_name["waf-block-body"]["status"]["4xx"] == by_name["waf-block-body"]["requests"]
    assert by_name["cached-h2-tls"]["detail"].startswith("h2")
    assert by_name["cached-h1"]["detail"].startswith("http/1.1")


def test_pgo_profile_reaches_the_code_and_the_checks_pass(demo_pgo: DemoPgo) -> None:
    merge, optimise = demo_pgo.report["merge"], demo_pgo.report["optimise"]
    assert merge["executed_functions"] >= merge["min_functions"] >= 1000
    assert optimise["stale_profile_warnings"] == 0
    assert "failed" not in optimise
    verify = optimise["verify"]
    assert verify["requests"] == demo_pgo.report["train"]["requests"]
    assert all(p["done"] == p["requests"] for p in verify["phases"])


def test_pgo_binary_runs(demo_pgo: DemoPgo) -> None:
    out = subprocess.run([str(demo_pgo.binary), "--build-info"], capture_output=True, text=True, check=True)
    assert "target=" in out.stdout
    print(f"demo-server pgo at scale {E2E_TRAIN_SCALE}: {demo_pgo.seconds:.0f} s")


def test_bolt_stage_on_the_demo_server(demo_pgo: DemoPgo) -> None:
    """PGO_BOLT=1 at a small scale: the optimised demo server BOLTed with a profile of its own training, checked,
    and replaying that training."""
    bolt, optimise = demo_pgo.report["bolt"], demo_pgo.report["optimise"]
    assert "failed" not in bolt, bolt.get("failed")
    assert bolt["input_sha256"] == optimise["binary_sha256"]  # BOLT's input is the checked PGO binary
    assert bolt["relocations"][".rela.text"] > 1000  # linked with --emit-relocs
    assert bolt["trained_here"] is True
    assert bolt["functions_with_profile"] >= 500 and bolt["stale_profile_functions"] == 0
    assert bolt["functions_with_profile"] < bolt["total_functions"]
    assert bolt["profile_main_crate_functions"] >= 1
    before, after = bolt["dyno_stats"]["before"], bolt["dyno_stats"]["after"]
    assert after["taken branches"] < before["taken branches"]  # the layout BOLT is for
    assert bolt["verify"]["requests"] == demo_pgo.report["train"]["requests"]
    assert all(p["done"] == p["requests"] for p in bolt["verify"]["phases"])
    binary = Path(bolt["binary"])
    assert bolt["binary_sha256"] != optimise["binary_sha256"] and binary.stat().st_size == bolt["binary_bytes"]
    out = subprocess.run([str(binary), "--build-info"], capture_output=True, text=True, check=True)
    assert "target=" in out.stdout
    assert "bolt " in demo_pgo.output and "the BOLTed binary ran the workload" in demo_pgo.output
