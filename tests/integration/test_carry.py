"""A profile carried forward (PGO_CARRY, recipes/llvm/carry.py) on the hello fixture with real cargo, rustc and
llvm-profdata: trained at version 0.1.0, built at 0.1.1 from that profile. Before, such a build was refused (every
function renamed by cargo's metadata hash); now its records are re-keyed, the survival is reported, and a profile
whose hot function was edited is refused by the survival floor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Pipeline, assert_ok, assert_refused

V0 = {"CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS": "-Csymbol-mangling-version=v0"}


def _trained(p: Pipeline, **extra: str) -> Path:
    """hello 0.1.0 trained: its merged profile, copied out of the work dir (the profile a project keeps)."""
    for stage in ("instrument", "train", "merge"):
        assert_ok(p.nox(stage, **extra))
    kept = p.root / "kept.profdata"
    kept.write_bytes((p.work / "hello-pgo.profdata").read_bytes())
    return kept


def _bump(p: Pipeline) -> None:
    """Version 0.1.1: the same code, every function of the crate renamed."""
    for path in (p.manifest, p.crate_dir / "Cargo.lock"):
        path.write_text(path.read_text().replace('version = "0.1.0"', 'version = "0.1.1"', 1))


def _carried(p: Pipeline) -> dict[str, Any]:
    record = json.loads((p.work / "report.json").read_text())["optimise"]["carried"]
    assert isinstance(record, dict)
    return record


@pytest.mark.refuses("no-ceiling-set-more-half-functions-have")
def test_a_version_bump_is_built_from_the_old_profile_re_keyed(hello: Pipeline) -> None:
    kept = _trained(hello)
    _bump(hello)
    # as before this change: the profile matches nothing of the crate's
    assert_refused(hello.nox("optimise", PGO_PROFDATA=str(kept), PGO_CARRY="0"), "have no profile data, more than half")
    # PGO_MAX_MISSING=0: a carried profile is judged by its survival, its 11 new functions are no refusal
    text = assert_ok(hello.nox("optimise", PGO_PROFDATA=str(kept), PGO_MAX_MISSING="0"))
    assert (
        "optimise: carried forward: 38 of the profile's 48 executed records used (0 as they are, 38 re-keyed)" in text
    )
    assert "carried     96.99 % of the given profile's count survived (floor 80 %)" in text
    carried = _carried(hello)
    assert carried["builds"] == 2 and carried["ambiguous"] == 10 and carried["edited"] == carried["gone"] == 0
    assert carried["by_crate"]["hello_pgo"] == 100.0
    assert carried["profile"] == str(hello.work / "hello-pgo.carried.profdata")
    assert (hello.work / "logs" / "optimise-carry-build.log").is_file()  # the first build's log, kept
    optimised = json.loads((hello.work / "report.json").read_text())["optimise"]
    assert optimised["stale_profile_warnings"] == 0 and optimised["missing_profile_functions"] == 11
    assert optimised["whole_profile"] == carried["profile"]  # the checks judge by the profile carried forward


def test_with_v0_symbols_the_carried_profile_builds_the_fresh_trainings_binary(tmp_path: Path) -> None:
    """v0 symbols name a generic instance's type arguments: every record re-keyed, and the binary built from the old
    version's profile is the one a fresh training of the new version gives, byte for byte."""
    old = Pipeline(tmp_path / "carried", "hello")
    kept = _trained(old, **V0)
    _bump(old)
    assert_ok(old.nox("optimise", PGO_PROFDATA=str(kept), **V0))
    carried = _carried(old)
    assert carried["survived_share"] == 100.0 and carried["ambiguous"] == carried["edited"] == 0
    fresh = Pipeline(tmp_path / "fresh", "hello")
    _bump(fresh)
    assert_ok(fresh.nox("pgo", **V0))
    built = (old.work / "optimised" / "hello-pgo").read_bytes()
    assert built == (fresh.work / "optimised" / "hello-pgo").read_bytes()


@pytest.mark.refuses("carried-profile-below-survival-floor")
def test_a_carried_profile_whose_hot_function_was_edited_is_refused_by_the_floor(hello: Pipeline) -> None:
    kept = _trained(hello, **V0)
    _bump(hello)
    main = hello.crate_dir / "src" / "main.rs"
    text = main.read_text()
    assert "    while n != 1 {\n" in text
    main.write_text(
        text.replace(
            "    while n != 1 {\n", "    while n != 1 {\n        if n == 7 {\n            steps += 2;\n        }\n", 1
        )
    )
    line = assert_refused(
        hello.nox("optimise", PGO_PROFDATA=str(kept), **V0),
        "the carried profile keeps 18.9 % of its count, below PGO_MIN_SURVIVAL=80 % (the default)",
        "collatz_steps 81.13 % (edited)",
    )
    assert "train again on this tree" in line
    assert not (hello.work / "optimised" / "hello-pgo").exists()
    assert _carried_failed(hello)
    # a lower floor takes it: the edited function's record left out, the rest used
    assert_ok(hello.nox("optimise", PGO_PROFDATA=str(kept), PGO_MIN_SURVIVAL="10", **V0))
    carried = _carried(hello)
    assert carried["edited"] == 1 and carried["lost"][0]["why"] == "edited"
    optimised = json.loads((hello.work / "report.json").read_text())["optimise"]
    assert optimised["stale_profile_warnings"] == 0


def _carried_failed(p: Pipeline) -> bool:
    """The refusal is recorded with what survived (the carried record), and the binary it built is rejected."""
    optimised = json.loads((p.work / "report.json").read_text())["optimise"]
    refused = isinstance(optimised.get("failed"), str) and "below PGO_MIN_SURVIVAL" in optimised["failed"]
    return refused and optimised["carried"]["edited"] == 1 and (p.work / "rejected" / "hello-pgo").is_file()
