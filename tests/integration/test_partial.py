"""Partial training (PGO_PARTIAL, on by default) on hello trained on collatz alone: the optimised build reads the
merged profile without the records of what the training never ran (primes_below, word_counts, checksum, …), the
checks judge the build by the whole profile (a never-run function is not "without profile data"; one edited since
the training is stale though the build never read its record), and PGO_PARTIAL=0 builds from the whole profile."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from recipes.llvm.profdata import parse_binary_ids, parse_record_counts
from recipes.store import sha256_file
from tests.conftest import Pipeline, assert_ok, assert_refused, written_records

pytestmark = pytest.mark.slow

COLLATZ_ONLY = """\
[workload]
description = "hello-pgo: collatz alone (the rest of its code never runs)"

[[instance]]
name = "cli"
mode = "command"

[[instance.phase]]
name = "collatz"
kind = "command"
args = ["collatz", "3000"]
runs = 2
"""


def _records(profile: Path) -> dict[str, int]:
    """Each record of ``profile`` and the sum of its counters, as llvm-profdata shows them."""
    shown = subprocess.run(
        ["llvm-profdata-22", "show", "--all-functions", "--counts", str(profile)],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ,
    )
    return parse_record_counts(shown.stdout)


def _binary_ids(profile: Path) -> list[str]:
    shown = subprocess.run(
        ["llvm-profdata-22", "show", "--binary-ids", str(profile)], capture_output=True, text=True, check=True
    )
    return parse_binary_ids(shown.stdout)


def read_of(p: Pipeline) -> str:
    return str(written_records(p.work)["optimise"]["store_path"])


@pytest.fixture
def collatz_only(tmp_path: Path) -> Pipeline:
    workload = tmp_path / "collatz.toml"
    workload.write_text(COLLATZ_ONLY, encoding="utf-8")
    return Pipeline(tmp_path, "hello", str(workload))


def test_the_build_reads_the_profile_without_what_never_ran_and_the_whole_one_judges_it(
    collatz_only: Pipeline,
) -> None:
    p = collatz_only
    text = assert_ok(p.nox("pgo"))
    optimised = written_records(p.work)["optimise"]
    merged = p.work / "hello-pgo.profdata"
    # the raw profiles carry the instrumented binary's build id (its paths in it); the merged one does not
    raws = sorted((p.work / "profraw").glob("*.profraw"))
    assert raws and _binary_ids(raws[0]) and _binary_ids(merged) == [] and _binary_ids(Path(read_of(p))) == []
    whole = _records(merged)
    never_run = {name for name, count in whole.items() if count == 0}
    assert any("primes_below" in name for name in never_run)  # the training ran collatz alone
    read = Path(optimised["store_path"])
    kept = _records(read)
    # the profile the build read: every record of the whole one that counted something, and no other
    assert set(kept) == set(whole) - never_run and all(kept.values())
    assert read.parent == p.store and read.name == sha256_file(read) + ".profdata"
    assert optimised["partial"] is True
    assert optimised["whole_profile_sha256"] == sha256_file(merged)
    assert optimised["whole_profile"] == str(merged)  # where merge wrote it; the store holds the one read
    assert sorted(f.name for f in p.store.iterdir()) == [".lock", read.name]
    assert optimised["never_run_records"] == len(never_run)
    assert (p.work / "hello-pgo.partial.profdata").read_bytes() == read.read_bytes()
    # the never-run functions this build compiled are counted as such, not as without profile data
    assert optimised["missing_profile_functions"] == 0
    assert 0 < optimised["never_run_functions"] <= len(never_run)
    assert optimised["stale_profile_warnings"] == 0
    assert f"partial     {optimised['never_run_functions']} functions compiled as unprofiled" in text
    assert re.search(rf"partial training: the build reads the profile without its {len(never_run)} records", text)

    # PGO_PARTIAL=0: the whole profile, read as it is
    text = assert_ok(p.nox("optimise", PGO_PARTIAL="0"))
    whole_build = written_records(p.work)["optimise"]
    assert whole_build["store_path"] == str(p.store / f"{sha256_file(merged)}.profdata")
    assert whole_build["whole_profile"] == whole_build["store_path"]
    assert (whole_build["partial"], whole_build["never_run_records"], whole_build["never_run_functions"]) == (
        False,
        0,
        0,
    )
    assert "partial     " not in text
    assert whole_build["binary_sha256"] != optimised["binary_sha256"]  # cold, not unprofiled: another binary


TEXT_ONLY = """\
[workload]
description = "multi-pgo: its text helpers alone (numkit never runs)"

[[instance]]
name = "cli"

[[instance.phase]]
name = "text"
kind = "command"
args = ["text", "profile guided optimisation of a small tool"]
runs = 2
"""


@pytest.mark.refuses("stale-profile-warnings")
def test_a_never_run_function_edited_since_the_training_is_stale(tmp_path: Path) -> None:
    # the partial profile has no record of numkit::gcd (its training never ran it), so LLVM says nothing of its
    # hash: the whole profile's never-run record of it, of another CFG hash than this build's, makes it stale
    workload = tmp_path / "text.toml"
    workload.write_text(TEXT_ONLY, encoding="utf-8")
    p = Pipeline(tmp_path, "multi", str(workload))
    for stage in ("instrument", "train", "merge"):
        assert_ok(p.nox(stage))
    lib = p.crate_dir / "numkit" / "src" / "lib.rs"
    source = lib.read_text(encoding="utf-8")
    edited = source.replace(
        "    while b != 0 {\n", "    if a == 0 {\n        return b;\n    }\n    while b != 0 {\n", 1
    )
    assert edited != source
    lib.write_text(edited, encoding="utf-8")
    line = assert_refused(p.nox("optimise"), "stale-profile warnings")
    assert "changed since the training (its never-run record in the whole profile has another CFG hash)" in line
    assert "_ZN6numkit3gcd" in line
    # unedited, the same training builds: gcd is never run, not missing
    lib.write_text(source, encoding="utf-8")
    assert_ok(p.nox("optimise"))
    optimised = written_records(p.work)["optimise"]
    assert optimised["stale_profile_warnings"] == 0 and optimised["never_run_functions"] > 0
    assert "numkit" not in optimised["missing_by_crate"]
