"""Fair comparisons: the plain build's C compilers are the PGO build's, and the bench table names each build's."""

from __future__ import annotations

from dataclasses import replace

from recipes.bench import cpu_report as report
from recipes.bench.builds import c_compilers_differ, c_compilers_text
from recipes.bench.meta import Meta
from recipes.results import CCodeRecord, CCrateRecord
from recipes.toolchain.cflags import CPlan, Language

CLANG = "/usr/bin/clang-22"
CLANG_COMMENT = "clang version 22.1.0 (++20251021014811+f4e5ca4d9b3c-1~exp1~20251021134830.1254)"
GCC_COMMENT = "GCC: (Debian 12.2.0-14) 12.2.0"


def _plan(compiler: str | None, setting: str = "auto") -> CPlan:
    off = None if compiler else "PGO_C=0"
    languages = tuple(
        Language(
            name,
            var,
            flags,
            (compiler if var == "CC" else compiler + "++",) if compiler else None,
            (host,),
            "22.1.0" if compiler else None,
            off,
        )
        for name, var, flags, host in (("C", "CC", "CFLAGS", "cc"), ("C++", "CXX", "CXXFLAGS", "c++"))
    )
    return CPlan("x86_64-unknown-linux-gnu", languages, setting, env={})


def _record(plan: CPlan, crates: list[CCrateRecord]) -> CCodeRecord:
    return plan.record(crates)


CRATE: CCrateRecord = {"crate": "csys", "objects": 2, "compilers": [GCC_COMMENT], "profile_flags": False}


def test_a_pgo_c_0_build_beside_a_plain_build_by_clang_is_refused() -> None:
    """The PGO build was made with PGO_C=0 (its C by the system's cc); this bench's plain build would compile it with
    clang-22: refused, as the comparison would mix the compiler with the profile."""
    recorded = _record(_plan(None, "off"), [CRATE])
    assert c_compilers_differ(recorded, _plan(CLANG)) == (
        "the PGO binary's C was compiled by the system's CC (PGO_C=off) and the plain build's would be by "
        "/usr/bin/clang-22"
    )
    assert c_compilers_differ(_record(_plan(CLANG), [CRATE]), _plan(None, "off")) == (
        "the PGO binary's C was compiled by /usr/bin/clang-22 and the plain build's would be by the system's CC "
        "(PGO_C=0)"
    )


def test_the_same_compilers_or_no_c_pass() -> None:
    assert c_compilers_differ(_record(_plan(CLANG), [CRATE]), _plan(CLANG)) is None
    assert c_compilers_differ(_record(_plan(None, "off"), [CRATE]), _plan(None, "off")) is None
    assert c_compilers_differ(_record(_plan(None, "off"), []), _plan(CLANG)) is None  # no crate compiled C
    assert c_compilers_differ(None, _plan(CLANG)) is None  # a record from before c_code


def test_another_list_of_packages_than_the_pgo_builds_is_refused() -> None:
    """PGO_C=plainc compiled the PGO build's cxxsys C with gcc; a plain build with PGO_C unset would give it clang."""
    listed = CPlan(
        "x86_64-unknown-linux-gnu",
        tuple(replace(lang, crates=("plainc",), chosen_by="PGO_C=plainc") for lang in _plan(CLANG).languages),
        "on",
        env={},
    )
    assert c_compilers_differ(_record(listed, [CRATE]), _plan(CLANG)) == (
        "the PGO binary's C was compiled by /usr/bin/clang-22 for plainc and the plain build's would be for every "
        "package (no list of packages)"
    )
    assert c_compilers_differ(_record(listed, [CRATE]), listed) is None


def test_the_table_names_each_builds_c_compilers() -> None:
    assert c_compilers_text(None) == ""
    assert c_compilers_text([]) == "no C"
    assert c_compilers_text([CRATE]) == f"csys: {GCC_COMMENT}"
    # ring's .S objects name no compiler ("unknown" in report.json): the table said "ring: Debian clang …, unknown"
    ring: CCrateRecord = {"crate": "ring", "objects": 3, "compilers": [CLANG_COMMENT, "unknown"], "profile_flags": True}
    assert c_compilers_text([ring]) == f"ring: {CLANG_COMMENT}, assembly"
    meta: Meta = {
        "builds": [
            {"key": "baseline", "label": "plain", "binary": "/b", "c_compilers": f"csys: {CLANG_COMMENT}"},
            {"key": "candidate", "label": "PGO", "binary": "/c", "c_compilers": f"csys: {GCC_COMMENT}"},
            {"key": "candidate-2", "label": "mine", "binary": "/d", "c_compilers": ""},
        ]
    }
    text = report.markdown([], meta)
    assert f"- baseline (plain): `/b`; its C and C++: csys: {CLANG_COMMENT}\n" in text
    assert f"- candidate (PGO): `/c`; its C and C++: csys: {GCC_COMMENT}\n" in text
    assert "- candidate (candidate-2): `/d`; its C and C++: not known (a binary given by path)\n" in text
    assert "⚠ the builds' C and C++ were compiled by different compilers" in text
    meta["builds"][1]["c_compilers"] = f"csys: {CLANG_COMMENT}"
    assert "compiled by different compilers" not in report.markdown([], meta)
    meta["builds"][0].pop("c_compilers")  # a result of an older bench says nothing
    assert "- baseline (plain): `/b`\n" in report.markdown([], meta)
