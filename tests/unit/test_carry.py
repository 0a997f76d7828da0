"""A profile carried forward (recipes/llvm/carry.py), judged on facts captured from real runs in tests/data/carry/:
hello 0.1.0's profile (``llvm-profdata show --all-functions --counts``), and the two builds of hello 0.1.1 with it
(``*.first.log``: with the profile as given; ``*.second.log``: with the profile written again and
``-pgo-view-raw-counts=text``), with legacy and with v0 symbol names, and 0.1.1 with ``collatz_steps`` edited."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from recipes.errors import CheckFailed
from recipes.llvm import carry, profdata
from recipes.toolchain.cargo import log as cargo_log

DATA = Path(__file__).resolve().parents[1] / "data" / "carry"


def _records(mangling: str) -> list[carry.Record]:
    return profdata.parse_records((DATA / f"hello-{mangling}-0.1.0.show.txt").read_text())


def _log(name: str) -> str:
    return (DATA / f"{name}.log").read_text()


def _first(mangling: str, build: str = "0.1.1") -> carry.CarryPlan:
    return carry.plan(_records(mangling), carry.parse_build(_log(f"hello-{mangling}-{build}.first")))


def _settled(mangling: str, build: str = "0.1.1") -> carry.CarryPlan:
    return carry.settle(_first(mangling, build), _log(f"hello-{mangling}-{build}.second"))


def test_the_records_of_a_profile_with_their_cfg_hash_and_count() -> None:
    records = _records("legacy")
    assert len(records) == 56
    assert sum(r.count > 0 for r in records) == 49  # the training executed 49 of 56 (the pipeline said so)
    collatz = next(r for r in records if "collatz_steps" in r.name)
    assert collatz.count > 1_000_000 and collatz.cfg_hash > 0


def test_the_first_build_tells_each_function_without_a_record() -> None:
    """Version 0.1.1 renames every function of hello's but ``main``: 55 without a record (partial training left the
    never-run ones out too), none read as far as this build can tell (it dumps nothing)."""
    build = carry.parse_build(_log("hello-legacy-0.1.1.first"))
    assert len(build.missing) == 55 and not build.mismatched and not build.read
    first = build.missing[0]
    assert re.fullmatch(r"hello_pgo\.[0-9a-f]{16}-cgu\.\d", first.cgu) and first.cfg_hash > 0


def test_a_diagnostic_broken_by_llvms_dump_is_still_read() -> None:
    """LLVM's dump is written from the codegen threads into rustc's stderr a word at a time: once, its first words
    went before a JSON diagnostic, which cargo then printed as it was. The checks' warnings read it all the same."""
    text = _log("hello-v0-mixed.build")
    assert 'pgo-view-raw-counts: {"$message_type":"diagnostic"' in text
    assert cargo_log.profile_warnings(text).missing == 54  # one lost from the rendered lines
    assert cargo_log.profile_warnings(cargo_log.unmixed(text)).missing == 55
    assert len(carry.parse_build(text).missing) == 55


def test_a_dumped_name_after_another_threads_words_is_read() -> None:
    """``Dump Function 11_RNvX…``: another thread's ``11`` between the dump's words; the record is read all the
    same (the second build of the edited crate has six such lines)."""
    text = _log("hello-v0-0.1.1-edited.second")
    assert len(re.findall(r"Dump Function \d+_R", text)) == 6
    settled = _settled("v0", "0.1.1-edited")
    assert not settled.gone


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("_ZN9hello_pgo8checksum17hb13ab36a579c66c1E", "_ZN9hello_pgo8checksumE"),
        (
            "hello_pgo.9e151ce622a56ce3-cgu.2;_ZN4core3ptr42drop_in_place$LT$alloc..string..String$GT$17haea0f09e86035f95E",
            "hello_pgo-cgu.2;_ZN4core3ptr42drop_in_place$LT$alloc..string..String$GT$E",
        ),
        ("_RNvCsdzt5WZrUBVL_9hello_pgo13collatz_steps", "_RNvC9hello_pgo13collatz_steps"),
        # a crate hash of 15 digits (rustc drops a leading zero): simple-http-server 0.8.1's, none of whose own
        # records was re-keyed before
        (
            "simple_http_server.c21f77394809d5c-cgu.3;_ZN18simple_http_server4main17h0123456789abcdefE",
            "simple_http_server-cgu.3;_ZN18simple_http_server4mainE",
        ),
        ("main", "main"),
        ("csrc/hot.c;csys_cold", "csrc/hot.c;csys_cold"),
    ],
)
def test_the_key_is_the_name_without_cargos_hashes(name: str, key: str) -> None:
    assert carry.symbol_key(name) == key


def test_a_version_bump_with_legacy_names_re_keys_all_but_the_generic_instances_alike() -> None:
    """Legacy symbols keep a generic instance's type arguments only in the hash: four groups of instances with one
    symbol and one CFG hash but other counts (``<Vec<T> as Drop>::drop`` of three T) cannot be told apart."""
    first = _first("legacy")
    assert len(first.renames) == 44 and len(first.ambiguous) == 11 and first.changes
    assert not first.drop and len(first.new) == 11  # the ambiguous groups' functions, compiled without a record
    assert [r.name for r in first.other] == ["main"]  # unmangled: not renamed by cargo's hashes, not judged
    renamed = first.renames["hello_pgo.9e151ce622a56ce3-cgu.2;_ZN9hello_pgo8checksum17hb13ab36a579c66c1E"]
    assert re.fullmatch(r"hello_pgo\.[0-9a-f]{16}-cgu\.\d;_ZN9hello_pgo8checksum17h[0-9a-f]{16}E", renamed)
    survived = carry.survival(_settled("legacy"))
    assert (survived.kept, survived.rekeyed, survived.ambiguous, survived.gone, survived.records) == (0, 38, 10, 0, 48)
    assert round(survived.share, 2) == 96.99 and survived.by_crate["hello_pgo"] == 100.0
    assert survived.lost[0][1] == "ambiguous" and "call_mut" in survived.lost[0][0]
    line = carry.lost_line(survived)
    assert line is not None and "-Csymbol-mangling-version=v0" in line


def test_a_version_bump_with_v0_names_re_keys_every_record() -> None:
    survived = carry.survival(_settled("v0"))
    assert (survived.rekeyed, survived.records, survived.ambiguous, survived.edited, survived.gone) == (48, 48, 0, 0, 0)
    assert survived.share == 100.0 and survived.never_run_rekeyed == 7  # partial training finds them renamed
    assert survived.kept_share == 0.0  # without re-keying, nothing of it: every name changed with the version


def test_an_edited_function_is_dropped_and_the_floor_refuses_naming_it() -> None:
    first = _first("v0", "0.1.1-edited")
    assert not first.drop  # renamed by the bump: its old record matches no name of this build
    survived = carry.survival(_settled("v0", "0.1.1-edited"))
    assert (
        survived.edited == 1
        and survived.gone == 0
        and survived.lost[0][:2] == ("_RNvC9hello_pgo13collatz_steps", "edited")
    )
    assert round(survived.share, 1) == 18.9
    with pytest.raises(CheckFailed, match=r"keeps 18\.9 % of its count, below PGO_MIN_SURVIVAL=80 % \(the default\)"):
        carry.refuse_below_floor(survived, 80.0, "the default")
    carry.refuse_below_floor(survived, 18.0, "PGO_MIN_SURVIVAL")  # at or above the floor: used


def test_a_function_edited_under_its_own_name_is_left_out() -> None:
    """Without a version bump the edited function keeps its name: LLVM's hash-mismatch warning names it, and its
    record is dropped from the profile written again (else the second build would warn again)."""
    records = [
        carry.Record("_ZN5crate1f17h0000000000000001E", 7, 100),
        carry.Record("_ZN5crate1g17h0000000000000002E", 8, 5),
    ]
    build = carry.BuildFunctions(
        read=frozenset(),
        missing=(),
        mismatched=(carry.Function("crate.0123456789abcdef-cgu.0", "_ZN5crate1f17h0000000000000001E", 9),),
    )
    first = carry.plan(records, build)
    assert first.drop == {("_ZN5crate1f17h0000000000000001E", 7)} and first.changes
    assert [r.name for r in first.edited] == ["_ZN5crate1f17h0000000000000001E"]
    assert [r.name for r in first.unsettled] == ["_ZN5crate1g17h0000000000000002E"]  # no dump: kept or gone


def test_a_profile_of_another_crate_is_not_ours() -> None:
    first = _first("legacy")
    assert carry.ours(first, ["hello_pgo"])
    assert not carry.ours(first, ["withdep_pgo"])


def test_the_profile_written_again_renames_records_and_their_call_targets_and_drops_the_edited() -> None:
    text = (DATA / "hello-v0-0.1.0.proftext").read_text()
    names = re.findall(r"^(\S+)\n# Func Hash:\n(\d+)$", text, re.M)
    (old, _), (gone, gone_hash) = names[0], names[1]
    target = f"{old}:7"
    with_target = text.replace("# NumValueSites:\n1\n0\n", f"# NumValueSites:\n1\n1\n{target}\n", 1)
    assert with_target != text
    out = carry.rewrite(with_target, {old: "renamed"}, {(gone, int(gone_hash))})
    assert out.startswith("# IR level Instrumentation Flag\n:ir\n")
    assert "\nrenamed\n# Func Hash:\n" in out and f"\n{old}\n" not in out
    assert "\nrenamed:7\n" in out and target not in out
    assert f"\n{gone}\n" not in out
    assert out.count("# Func Hash:") == text.count("# Func Hash:") - 1


@pytest.mark.parametrize(
    ("name", "crate"),
    [
        ("_ZN9hello_pgo8checksum17hb13ab36a579c66c1E", "hello_pgo"),
        ("hello_pgo.9e151ce622a56ce3-cgu.2;_ZN4core3ptr42drop_in_placeE", "hello_pgo"),
        ("_ZN70_$LT$alloc..vec..Vec$LT$T$C$A$GT$$u20$as$u20$core..ops..drop..Drop$GT$4drop17hf533bc77b6c99d06E", "?"),
        ("_RNvCsdzt5WZrUBVL_9hello_pgo13collatz_steps", "hello_pgo"),
        ("main", "?"),
    ],
)
def test_the_crate_of_a_record(name: str, crate: str) -> None:
    assert carry.crate_of(name) == crate


def test_a_local_function_in_another_codegen_unit_is_re_keyed_within_its_crate() -> None:
    """An edit elsewhere in a crate renumbers its codegen units: a local function's record of unit 2 is matched to
    the function now in unit 3 (the same symbol without its hash, the same CFG hash, one of each in the crate).
    ripgrep 15.1.0's profile for 15.2.0 re-keyed 5,792 records without this, 8,608 with it."""
    old = carry.Record("krate.0123456789abcdef-cgu.2;_ZN5krate1f17h1111111111111111E", 5, 10)
    copies = [
        carry.Record(f"krate.0123456789abcdef-cgu.{n};_ZN5krate1g17h3333333333333333E", 6, count)
        for n, count in ((1, 4), (2, 9))
    ]
    build = carry.BuildFunctions(
        read=frozenset(),
        missing=(
            carry.Function("krate.fedcba9876543210-cgu.3", "_ZN5krate1f17h2222222222222222E", 5),
            *(carry.Function(f"krate.fedcba9876543210-cgu.{n}", "_ZN5krate1g17h4444444444444444E", 6) for n in (4, 5)),
        ),
        mismatched=(),
    )
    first = carry.plan([old, *copies], build)
    assert first.renames == {old.name: "krate.fedcba9876543210-cgu.3;_ZN5krate1f17h2222222222222222E"}
    assert sorted(r.name for r in first.ambiguous) == sorted(r.name for r in copies)  # two copies, counts differ
    assert len(first.new) == 2
