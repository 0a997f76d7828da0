"""The health gate (PGO_REFERENCE, PGO_MAX_LOST) on the hello fixture with the real tools: a good profile kept,
then a training of the same workload (passes, recorded) and one of half of it (refused at merge, before anything is
built from it, the merged profile removed); a reference that is not a file is refused before anything is built."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REPO, Pipeline, assert_ok, assert_refused


def _half_workload(dest: Path) -> Path:
    """hello's workload without its collatz and primes phases: 6 of its 11 runs, most of its count gone."""
    text = (REPO / "profiles" / "hello.toml").read_text()
    head = text[: text.index("# Bench scenarios")]
    blocks = head.split("[[instance.phase]]")
    kept = [blocks[0], *(b for b in blocks[1:] if 'name = "words"' in b or 'name = "checksum"' in b)]
    dest.write_text("[[instance.phase]]".join(kept))
    return dest


@pytest.mark.refuses("merged-profile-lost-more-than-pgo-max-lost", "pgo-reference-not-a-file")
def test_the_health_gate_passes_a_whole_training_and_refuses_half_of_one(hello: Pipeline) -> None:
    assert_ok(hello.nox("instrument"))
    assert_ok(hello.nox("train"))
    assert_ok(hello.nox("merge"))
    kept = hello.root / "kept.profdata"
    kept.write_bytes((hello.work / "hello-pgo.profdata").read_bytes())
    # the same workload again: nothing lost, said and recorded
    assert_ok(hello.nox("train"))
    text = assert_ok(hello.nox("merge", PGO_REFERENCE=str(kept)))
    assert f"merge: against {kept}: 41 functions executed (41 there)" in text
    assert "health      0 % of the reference's count lost (ceiling 25 %)" in text
    merged = json.loads((hello.work / "report.json").read_text())["merge"]
    assert merged["health"]["lost_share"] == 0.0 and merged["health"]["reference"] == str(kept)
    # half the workload: refused at merge, its profile not left for optimise
    half = _half_workload(hello.root / "half.toml")
    assert_ok(hello.nox("train", PGO_WORKLOAD=str(half)))
    line = assert_refused(
        hello.nox("merge", PGO_WORKLOAD=str(half), PGO_REFERENCE=str(kept)),
        "the merged profile lost 90.13 % of the reference's count, more than PGO_MAX_LOST=25 % (the default)",
        "collatz_steps",
    )
    assert "see whether the training ran whole" in line
    assert not (hello.work / "hello-pgo.profdata").exists()
    merged = json.loads((hello.work / "report.json").read_text())["merge"]
    assert "PGO_MAX_LOST" in merged["failed"] and merged["health"]["lost_functions"] == 8
    # a reference that is no file: refused before anything is built
    missing = hello.root / "nothing.profdata"
    assert_refused(
        hello.nox("pgo", PGO_OUT=str(hello.root / "other"), PGO_REFERENCE=str(missing)), f"{missing}: no such file"
    )
    assert not (hello.root / "other").exists()
