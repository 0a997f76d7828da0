"""Fair comparisons on csys (C and C++ built by cc-rs): a PGO_C=0 PGO build is not compared with a plain build
whose C clang compiled; the refusal comes before the plain build."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Pipeline, assert_ok, assert_refused

pytestmark = pytest.mark.slow


@pytest.mark.refuses("bench-plain-c-compilers-differ")
def test_a_pgo_c_0_build_is_not_benched_against_a_plain_build_by_clang(tmp_path: Path) -> None:
    pipeline = Pipeline(tmp_path, "csys")
    assert_ok(pipeline.nox("pgo", PGO_C="0", PGO_TRAIN_SCALE="0.2"))
    line = assert_refused(pipeline.nox("bench", "--trials", "1", "--scale", "0.1"))
    assert "the PGO binary's C was compiled by the system's CC (PGO_C=off) and the plain build's would be by " in line
    assert "clang-22" in line and "run the bench with the PGO build's PGO_C" in line, line
    assert not (pipeline.work / "plain-target").exists()  # refused before the plain build
