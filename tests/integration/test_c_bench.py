"""The bench's coverage check on csys (hot loops in C and C++ built by cc-rs): the C functions of build scripts
counted with and without training counts, and the one the bench runs that the training never did."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recipes.toolchain import cflags
from tests.conftest import Pipeline, assert_ok

pytestmark = pytest.mark.slow


def test_the_coverage_check_counts_the_c_functions(tmp_path: Path) -> None:
    pipeline = Pipeline(tmp_path, "csys")
    assert_ok(pipeline.nox("plain"))
    # the plain build's C by the clang the PGO build uses, without the profile: the builds differ by it only
    plain_objects = cflags.c_objects(pipeline.work / "plain-target", "x86_64-unknown-linux-gnu")["csys"]
    assert plain_objects and all("clang version 22" in o.compiler and not o.instrumented for o in plain_objects)
    text = assert_ok(pipeline.nox("bench", "--trials", "1", "--scale", "0.2", "--profile-use-args=-disable-icp"))
    c_code = json.loads((pipeline.work / "bench" / "results.json").read_text())["coverage"]["c_code"]
    # csys_checksum and csys_cpp_sum trained, csys_cold not (mix_step is inlined: no function of its own)
    assert c_code["functions"] == 3 and c_code["with_training_counts"] == 2, c_code
    assert c_code["without_training_counts"] == 1 and c_code["bench_executed"] == 2, c_code
    assert c_code["bench_untrained"] == ["csys_cold"], c_code
    assert [c["crate"] for c in c_code["crates"]] == ["csys"]
    assert (
        "bench: coverage: 3 C/C++ functions of build scripts, 2 with training counts, 1 without; the bench executed "
        "2, 1 of them never in training" in text
    )
    markdown = (pipeline.work / "bench" / "results.md").read_text()
    assert "The C and C++ of build scripts: 3 functions, 2 with counts in the training's profile" in markdown
    # each build's C compilers named, the same for both: the comparison is of the profile alone
    assert "- baseline (plain): `" in markdown and "`; its C and C++: csys: " in markdown
    # a --profile-use-args build compiles the C as the PGO build does, by the pipeline's clang wrapper (without it,
    # cc-rs's default cc: gcc)
    assert markdown.count("clang version 22") == 3, markdown[:2000]
    assert "- candidate (PGO -disable-icp): `" in markdown
    assert "compiled by different compilers" not in markdown
