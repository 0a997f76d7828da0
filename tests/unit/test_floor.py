"""The executed-function floor (recipes.stages.merge.FunctionFloor): what it is for a build's total, and its refusal,
which says what total the floor was set against."""

from __future__ import annotations

from recipes.stages.merge import FunctionFloor


def test_absolute_floor_does_not_scale() -> None:
    floor = FunctionFloor(3400, "PGO_MIN_FUNCTIONS")
    assert floor.for_total(13436) == floor.for_total(7852) == 3400
    line = floor.refusal(1990, 7852).line()
    assert "executed 1990 of 7852 functions, fewer than PGO_MIN_FUNCTIONS=3400" in line
    assert "total of functions is not recorded; this build has 7852" in line
    assert "another cargo profile (lto, codegen-units) does not carry" in line
    assert "min_functions_total" in line


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
