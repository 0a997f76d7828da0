"""Crates nobody here wrote, as a user meets them: the published source fetched by cargo as a dependency of a
throwaway crate, a project of its own with a ``[tool.pgo]`` table naming one of profiles/examples/, and
``nox -f path/to/pgo-recipes/noxfile.py -s pgo`` run from it. Nothing else may be needed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from recipes.bolt import OVERFLOW_ASSERTION
from recipes.workload import load_workload
from tests.conftest import REPO, clean_env, output

pytestmark = [pytest.mark.slow, pytest.mark.server]

#: crate -> (published version, binary, training scale)
EXAMPLES = {
    "ripgrep": ("15.2.0", "rg", "1"),
    "simple-http-server": ("0.8.1", "simple-http-server", "0.5"),
}


def published_source(name: str, version: str, tmp_path: Path) -> Path:
    """The crate's published source, as cargo fetches it for a dependency, copied to a project of its own."""
    throwaway = tmp_path / "throwaway"
    (throwaway / "src").mkdir(parents=True)
    (throwaway / "src" / "main.rs").write_text("fn main() {}\n")
    (throwaway / "Cargo.toml").write_text(
        f'[package]\nname = "throwaway"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n'
        f'[dependencies]\n{name} = "={version}"\n'
    )
    subprocess.run(["cargo", "fetch", "--quiet"], cwd=throwaway, check=True, env=clean_env(), timeout=600)
    cargo_home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    found = sorted(cargo_home.glob(f"registry/src/*/{name}-{version}/Cargo.toml"))
    assert found, f"cargo fetch left no {name}-{version} under {cargo_home}/registry/src"
    project = tmp_path / name
    shutil.copytree(found[0].parent, project)
    return project


#: a published crate trained with PGO_BOLT=1: jaq's legacy symbol names (up to 6,504 characters) overflow BOLT's
#: instrumentation runtime unless the functions they would overflow are left out (README "Long Rust names")
BOLT_EXAMPLE = ("jaq", "2.3.0", "jaq", "1")


def _pgo(name: str, version: str, scale: str, tmp_path: Path, **extra: str) -> tuple[Path, dict[str, Any], Path]:
    """``nox -s pgo`` from the crate's published source with its example workload: the project, its report.json
    and the workload."""
    project = published_source(name, version, tmp_path)
    workload = REPO / "profiles" / "examples" / f"{name}.toml"
    (project / "pyproject.toml").write_text(f'[tool.pgo]\nworkload = "{workload}"\nlocked = true\n')
    proc = subprocess.run(
        [sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", "pgo"],
        cwd=project,
        env=clean_env({"PGO_TRAIN_SCALE": scale, "PGO_PROFILE_STORE": str(tmp_path / "store"), **extra}),
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    text = output(proc)
    assert proc.returncode == 0, text[-4000:]
    assert "Traceback" not in text
    return project, json.loads((project / "target" / "pgo" / "report.json").read_text()), workload


def test_bolt_on_a_published_crate_with_long_names(tmp_path: Path) -> None:
    name, version, binary, scale = BOLT_EXAMPLE
    project, report, workload = _pgo(name, version, scale, tmp_path, PGO_BOLT="1")
    floors = load_workload(workload)
    assert report["merge"]["executed_functions"] >= (floors.min_functions or 1)
    bolted = report["bolt"]
    assert bolted["longest_function_name"] > 5000  # two such names on a line would not fit
    assert bolted["instrumentation_skipped_functions"] >= 1
    assert bolted["train"]["fdata_files"] == report["train"]["requests"]  # one whole .fdata per run
    assert bolted["stale_profile_functions"] == 0 and bolted["functions_with_profile"] > 500
    assert bolted["profile_main_crate_functions"] > 0
    assert Path(bolted["binary"]) == project / "target" / "pgo" / "bolted" / binary
    assert bolted["verify"]["requests"] == report["train"]["requests"]
    # the skip list is what made the training pass: instrumented again without it, the same PGO binary's runtime
    # asserts at exit, when it writes its .fdata, on the workload's filters (here the "select" phase's)
    bare = tmp_path / "instrumented-without-skip-list"
    subprocess.run(
        [bolted["llvm_bolt"], bolted["input"], "-instrument", "-o", str(bare),
         f"-instrumentation-file={tmp_path / 'bare.fdata'}"],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    ran = subprocess.run(
        [str(bare), "-n", "[range(20000) | select(. % 7 == 0)] | length"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 1 and OVERFLOW_ASSERTION in ran.stderr, (ran.returncode, ran.stderr[-500:])
    print(
        name,
        {stage: report[stage]["seconds"] for stage in ("instrument", "train", "merge", "optimise", "bolt")},
        report["merge"]["executed_functions"],
        report["optimise"]["missing_profile_functions"],
        bolted["instrumentation_skipped_functions"],
        bolted["longest_function_name"],
        bolted["functions_with_profile"],
        bolted["total_functions"],
        bolted["dyno_stats"],
    )


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_crate_from_crates_io(name: str, tmp_path: Path) -> None:
    version, binary, scale = EXAMPLES[name]
    project, report, workload = _pgo(name, version, scale, tmp_path)
    floors = load_workload(workload)
    merged, optimised = report["merge"], report["optimise"]
    assert merged["executed_functions"] >= (floors.min_functions or 1)
    if floors.max_missing is not None:
        assert optimised["missing_profile_functions"] <= floors.max_missing
    assert optimised["stale_profile_warnings"] == 0
    assert optimised["main_crate_functions_with_profile"] > 0
    assert Path(optimised["binary"]) == project / "target" / "pgo" / "optimised" / binary
    assert optimised["verify"]["requests"] == report["train"]["requests"]
    # the figures the examples' README quotes
    print(
        name,
        {stage: report[stage]["seconds"] for stage in ("instrument", "train", "merge", "optimise")},
        merged["executed_functions"],
        merged["total_functions"],
        optimised["missing_profile_functions"],
        optimised["main_crate_functions_with_profile"],
        optimised["main_crate_functions_without_profile"],
    )
