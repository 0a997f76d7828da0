"""The executed-function floor under another cargo profile: hello's training executes 49 of 56 functions with the
default release profile and 16 of 21 with fat LTO and one codegen unit (CARGO_PROFILE_RELEASE_LTO=fat,
CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1): a floor measured on the default build refuses the LTO build, and says the
total it was set against; with min_functions_total it scales with the build's total."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO, Pipeline, assert_ok, assert_refused

pytestmark = pytest.mark.slow

LTO = {"CARGO_PROFILE_RELEASE_LTO": "fat", "CARGO_PROFILE_RELEASE_CODEGEN_UNITS": "1"}


def _workload(tmp_path: Path, name: str, head: str) -> Path:
    """hello's workload with another [workload] head (its floor)."""
    text = (REPO / "profiles" / "hello.toml").read_text().replace("min_functions = 5", head, 1)
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


@pytest.mark.refuses("training-executed-fewer-functions-floor")
def test_floor_of_the_default_profile_under_fat_lto(hello: Pipeline, tmp_path: Path) -> None:
    for stage in ("instrument", "train"):
        assert_ok(hello.nox(stage, **LTO))
    absolute = _workload(tmp_path, "absolute", "min_functions = 40")
    proc = hello.nox("merge", PGO_WORKLOAD=str(absolute), **LTO)
    assert_refused(proc, "functions, fewer than", "min_functions=40", "total of functions is not recorded")
    assert "min_functions_total" in proc.stdout + proc.stderr
    measured = _workload(tmp_path, "measured", "min_functions = 40\nmin_functions_total = 56")
    assert_ok(hello.nox("merge", PGO_WORKLOAD=str(measured), **LTO))
    merged = json.loads((hello.work / "report.json").read_text())["merge"]
    total = merged["total_functions"]
    assert total < 56  # fat LTO and one codegen unit instrument fewer functions
    assert merged["min_functions"] == 40 * total // 56 <= merged["executed_functions"]
    assert (merged["min_functions_set"], merged["min_functions_total"]) == (40, 56)
    # the default profile: the same workload, its floor as set
    default = Pipeline(tmp_path / "default", "hello", workload=str(measured))
    shutil.rmtree(default.crate_dir / "target", ignore_errors=True)
    for stage in ("instrument", "train", "merge"):
        assert_ok(default.nox(stage))
    merged = json.loads((default.work / "report.json").read_text())["merge"]
    assert (merged["total_functions"], merged["min_functions"]) == (56, 40)
