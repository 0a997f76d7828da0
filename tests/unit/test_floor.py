"""The executed-function floor (recipes.stages.merge.FunctionFloor): what it is for a build's total, and its refusal,
which says what total the floor was set against; where the floor and the ceiling come from
(recipes.stages.frame.threshold: the configuration, else the workload file)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from recipes.plan import BuildPlan
from recipes.stages.frame import Chosen, threshold
from recipes.stages.merge import FunctionFloor, function_floor
from recipes.stages.optimise import max_missing
from recipes.workload import Workload


def _plan(**configured: int | None) -> BuildPlan:
    config = SimpleNamespace(
        min_functions=configured.get("min_functions"),
        max_missing=configured.get("max_missing"),
        source=lambda key: f"PGO_{key.upper()}",
    )
    return cast("BuildPlan", SimpleNamespace(config=config))


def _workload(min_functions: int | None, max_missing: int | None, total: int | None = None) -> Workload:
    return cast(
        "Workload",
        SimpleNamespace(
            path=Path("profiles/w.toml"),
            min_functions=min_functions,
            max_missing=max_missing,
            min_functions_total=total,
        ),
    )


def test_the_configuration_comes_before_the_workload_file_for_the_floor_and_the_ceiling() -> None:
    workload = _workload(30, 40, total=500)
    both = _plan(min_functions=3, max_missing=4)
    assert threshold(both, workload, "min_functions") == Chosen(3, "PGO_MIN_FUNCTIONS")
    assert threshold(both, workload, "max_missing") == Chosen(4, "PGO_MAX_MISSING")
    assert function_floor(both, workload) == FunctionFloor(3, "PGO_MIN_FUNCTIONS")
    assert max_missing(both, workload) == 4
    neither = _plan()
    assert threshold(neither, workload, "max_missing") == Chosen(40, "profiles/w.toml max_missing", workload)
    assert function_floor(neither, workload) == FunctionFloor(30, "profiles/w.toml min_functions", set_against=500)
    assert max_missing(neither, workload) == 40
    assert threshold(neither, _workload(None, None), "min_functions") is None
    assert threshold(neither, None, "max_missing") is None
    assert function_floor(neither, None) == FunctionFloor(1, "the default")
    assert max_missing(neither, _workload(30, None)) is None


@pytest.mark.refuses("training-executed-fewer-functions-floor")
def test_absolute_floor_does_not_scale() -> None:
    floor = FunctionFloor(3400, "PGO_MIN_FUNCTIONS")
    assert floor.for_total(13436) == floor.for_total(7852) == 3400
    line = floor.refusal(1990, 7852).line()
    assert "executed 1990 of 7852 functions, fewer than PGO_MIN_FUNCTIONS=3400" in line
    assert "total of functions is not recorded; this build has 7852" in line
    assert "another cargo profile (lto, codegen-units) does not carry" in line
    assert "min_functions_total" in line


@pytest.mark.refuses("training-executed-fewer-functions-floor")
def test_floor_with_its_total_scales_with_the_build() -> None:
    """The demo server's figures (issue 12): 3400 measured on 13,436 functions; fat LTO instruments 7,852."""
    floor = FunctionFloor(3400, "profiles/demo-server.toml min_functions", set_against=13436)
    assert floor.for_total(13436) == 3400
    assert floor.for_total(7852) == 1986  # 3400 * 7852 // 13436: the fat-LTO training's 1,990 passes
    line = floor.refusal(1500, 7852).line()
    assert "fewer than the floor 1986 (3400 of 13436 functions in profiles/demo-server.toml min_functions" in line
    assert "scaled to this build's 7852" in line
    assert floor.as_json(7852) == {
        "min_functions": 1986,
        "min_functions_set": 3400,
        "min_functions_source": "profiles/demo-server.toml min_functions",
        "min_functions_total": 13436,
    }
