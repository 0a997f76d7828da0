"""Crates nobody here wrote, as a user meets them: the published source fetched by cargo as a dependency of a
throwaway crate, a project of its own with a ``[tool.pgo]`` table naming one of profiles/examples/, and
``nox -f path/to/pgo-recipes/noxfile.py -s pgo`` run from it. Nothing else may be needed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

from recipes.llvm.boltlib import OVERFLOW_ASSERTION
from recipes.workload import load_workload
from tests.conftest import REPO, clean_env, output

pytestmark = [pytest.mark.slow, pytest.mark.server]

#: crate -> (published version, binary, training scale); ripgrep's own example (ripgrep.toml) is trained as a shard
#: beside ripgrep-pcre2.toml in the PCRE2 test below, one build of ripgrep for both
EXAMPLES = {
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
#: instrumentation runtime unless the functions they would overflow are left out (docs/bolt.md, "Long Rust names")
BOLT_EXAMPLE = ("jaq", "2.3.0", "jaq", "1")


#: ripgrep with its ``pcre2`` feature, whose ``rg -P`` runs PCRE2's C (pcre2-sys builds it with cc-rs only when
#: PCRE2_SYS_STATIC=1: it links the system's libpcre2-8 when pkg-config finds one), trained and BOLTed with the Rust
PCRE2_EXAMPLE = ("ripgrep", "15.2.0", "rg", "1", "ripgrep-pcre2")


def _pgo(
    name: str,
    version: str,
    scale: str,
    tmp_path: Path,
    *,
    workload_name: str | None = None,
    features: tuple[str, ...] = (),
    shards: tuple[Path, ...] = (),
    **extra: str,
) -> tuple[Path, dict[str, Any], Path]:
    """``nox -s pgo`` from the crate's published source with its example workload (``workload_name``, else the
    crate's name), and ``shards`` after it as more shards of the training: the project, its report.json and the
    (first) workload."""
    project = published_source(name, version, tmp_path)
    workload = REPO / "profiles" / "examples" / f"{workload_name or name}.toml"
    table = f'[tool.pgo]\nworkload = "{workload}"\nlocked = true\n'
    if shards:
        table = f"[tool.pgo]\nworkload = {json.dumps([str(workload), *map(str, shards)])}\nlocked = true\n"
    if features:
        table += f"features = {json.dumps(list(features))}\n"
    (project / "pyproject.toml").write_text(table)
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


def _needed(binary: Path) -> list[str]:
    """The shared libraries the binary names (DT_NEEDED)."""
    with binary.open("rb") as f:
        dynamic = ELFFile(f).get_section_by_name(".dynamic")
        assert isinstance(dynamic, DynamicSection)
        return [str(getattr(tag, "needed", "")) for tag in dynamic.iter_tags("DT_NEEDED")]


def _block_counts(shown: str, function: str) -> list[int]:
    """A function's block counts in ``llvm-profdata show --all-functions --counts``."""
    found = re.search(
        rf"^  {re.escape(function)}:\n(?:    .*\n)*?    Block counts: \[(?P<counts>[\d, ]*)\]", shown, re.M
    )
    assert found, f"{function} is not in the merged profile"
    return [int(n) for n in found["counts"].split(",") if n.strip()]


def test_c_of_a_published_sys_crate_is_profiled_and_bolted(tmp_path: Path) -> None:
    """ripgrep with PCRE2's C, trained by two shards at equal shares: ripgrep-pcre2.toml (first: the workload BOLT
    and the replays run) and ripgrep.toml, ripgrep's own example, whose floors its shard must meet."""
    name, version, _, scale, workload_name = PCRE2_EXAMPLE
    plain_example = REPO / "profiles" / "examples" / "ripgrep.toml"
    project, report, workload = _pgo(
        name,
        version,
        scale,
        tmp_path,
        workload_name=workload_name,
        features=("pcre2",),
        shards=(plain_example,),
        PCRE2_SYS_STATIC="1",
        PGO_BOLT="1",
    )
    shards = {s["name"]: s for s in report["merge"]["shards"]}
    assert sorted(shards) == ["ripgrep", "ripgrep-pcre2"]
    assert all(abs(s["share_reached"] - 0.5) < 0.01 for s in shards.values()), shards
    floors = load_workload(plain_example)
    assert shards["ripgrep"]["executed_functions"] >= (floors.min_functions or 1)
    assert shards["ripgrep-pcre2"]["executed_functions"] >= (load_workload(workload).min_functions or 1)
    assert shards["ripgrep"]["only_this_shard"] > 0 and shards["ripgrep-pcre2"]["only_this_shard"] > 0
    check_pcre2_run(project, report, workload)


def check_pcre2_run(project: Path, report: dict[str, Any], workload: Path) -> None:
    """What the ripgrep-pcre2 run must show: the floors, PCRE2's C profiled with counts, BOLT after it."""
    binary = PCRE2_EXAMPLE[2]
    floors = load_workload(workload)
    merged, optimised = report["merge"], report["optimise"]
    assert merged["executed_functions"] >= (floors.min_functions or 1)
    assert floors.max_missing is not None and optimised["missing_profile_functions"] <= floors.max_missing
    assert optimised["stale_profile_warnings"] == 0
    # PCRE2's C: compiled by clang of rustc's major with the profile in both builds, its functions in the profile
    for stage in ("instrument", "optimise"):
        crates = {c["crate"]: c for c in report[stage]["c_code"]["crates"]}
        assert crates["pcre2-sys"]["profile_flags"], crates
        assert all(c.startswith("Debian clang version 22.") for c in crates["pcre2-sys"]["compilers"])
    pcre2 = next(c for c in optimised["c_code"]["crates"] if c["crate"] == "pcre2-sys")
    assert pcre2["stale"] == []
    assert len(pcre2["functions_with_profile"]) >= 200  # measured: 238 with profile data, 26 without
    hot = ("pcre2_match_8", "pcre2_compile_8", "pcre2_jit_compile_8", "_pcre2_valid_utf_8")
    assert set(hot) <= set(pcre2["functions_with_profile"])
    shown = subprocess.run(
        [merged["llvm_profdata"], "show", "--all-functions", "--counts", merged["profile"]],
        capture_output=True,
        text=True,
        check=True,
        env=clean_env(),
    ).stdout
    # the runs of the PCRE2 shard (with shards), whose counts the weighted merge multiplies by its weight (at least 1)
    runs = next((s["requests"] for s in report["train"].get("shards", []) if s["name"] == PCRE2_EXAMPLE[4]), None)
    runs = report["train"]["requests"] if runs is None else runs
    # pcre2_match_8 is called for every search of every run: far more often than there are runs
    assert max(_block_counts(shown, "pcre2_match_8")) > 100 * runs
    assert all(max(_block_counts(shown, f)) > 0 for f in hot)
    # the \C searches run in PCRE2's interpreter: its match() (a file-local function: named by its file)
    interpreter = ("upstream/src/pcre2_match.c;match", "upstream/src/pcre2_match.c;match_ref")
    assert all(max(_block_counts(shown, f)) > 100 * runs for f in interpreter[:1])
    assert all(sum(_block_counts(shown, f)) > 0 for f in interpreter)
    # (the optimised build's clang inlines the hot match() into pcre2_match_8: no symbol of its own is left)
    # (a static function is named by its source as clang's command gave it, as the profile names it)
    assert interpreter[1] in pcre2["functions_with_profile"], pcre2["functions_with_profile"]
    # the PCRE2 in the binary is the one compiled here, not the system's
    assert not [lib for lib in _needed(Path(optimised["binary"])) if "pcre2" in lib]
    # BOLT after the C-profiled PGO binary
    bolted = report["bolt"]
    assert Path(bolted["binary"]) == project / "target" / "pgo" / "bolted" / binary
    assert bolted["stale_profile_functions"] == 0 and bolted["functions_with_profile"] > 300
    assert bolted["verify"]["requests"] == runs
    print(
        PCRE2_EXAMPLE[4],
        {stage: report[stage]["seconds"] for stage in ("instrument", "train", "merge", "optimise", "bolt")},
        merged["executed_functions"],
        merged["total_functions"],
        optimised["missing_profile_functions"],
        optimised["main_crate_functions_with_profile"],
        len(pcre2["functions_with_profile"]),
        len(pcre2["functions_without_profile"]),
        len(pcre2["missing"]),
        bolted["functions_with_profile"],
        bolted["total_functions"],
    )
