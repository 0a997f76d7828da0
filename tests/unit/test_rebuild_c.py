"""The C code in a release's records: recipes/rebuild.c_setting (the rebuild's C setting comes from the release's
manifest, not from this machine), the manifest's ``c_code`` checked and carried into the provenance statements."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from recipes.errors import CheckFailed, ToolchainError
from recipes.release import provenance
from recipes.release.manifest import CCode, parse
from recipes.release.rebuild import c_setting
from tests.unit.test_provenance import manifest

ENV = {"PATH": "/usr/bin:/bin"}


def _line() -> str:
    return subprocess.run(["clang-22", "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[0]


def test_a_manifest_without_profiled_c_rebuilds_it_unprofiled() -> None:
    assert c_setting(None, ENV) == (False, None)  # a release of before the C was profiled
    assert c_setting(CCode(profiled=False, clang=None, crates=()), ENV) == (False, None)


def test_a_manifest_with_profiled_c_rebuilds_it_with_clang_of_its_major() -> None:
    on, clang = c_setting(CCode(profiled=True, clang=_line(), crates=()), ENV)
    assert on is True and clang is not None and Path(clang).name == "clang-22"


@pytest.mark.refuses("rebuild-release-c-profiled-clang-whose-major")
def test_a_recorded_clang_that_is_not_here_refused() -> None:
    line = "Debian clang version 99.0.1 (1~deb12u1)"
    with pytest.raises(ToolchainError) as caught:
        c_setting(CCode(profiled=True, clang=line, crates=()), ENV)
    assert caught.value.message == f"the release compiled its C with {line} and the profile; there is no clang-99 here"
    assert caught.value.hint.startswith("`apt-get install clang-99`")


@pytest.mark.refuses("rebuild-manifest-says-c-profiled-but-names")
def test_a_profiled_c_without_its_clang_version_refused() -> None:
    with pytest.raises(CheckFailed, match="the manifest says the C was profiled but names no clang version"):
        c_setting(CCode(profiled=True, clang="gcc 12", crates=()), ENV)


CLANG = "Debian clang version 22.1.8 (1~deb12u1)"
C_CODE = {"profiled": True, "clang": CLANG, "crates": [{"crate": "zstd-sys", "compilers": [CLANG]}]}


def test_the_c_code_of_a_manifest_in_its_statements() -> None:
    data = manifest(c_code=C_CODE)
    definition = provenance.predicate(parse(data, "m.json"))["buildDefinition"]
    assert definition["internalParameters"]["c_code"] == {"profiled": True, "crates": ["zstd-sys"]}
    deps = {d["name"]: d for d in definition["resolvedDependencies"]}
    assert deps["clang"] == {"name": "clang", "uri": "pkg:generic/clang@22.1.8", "annotations": {"version": CLANG}}
    plain = provenance.predicate(parse(manifest(), "m.json"))["buildDefinition"]  # a release of before: neither
    assert "c_code" not in plain["internalParameters"]
    assert "clang" not in {d["name"] for d in plain["resolvedDependencies"]}


@pytest.mark.refuses("verify-rebuild-manifest-c-code-ill-formed")
@pytest.mark.parametrize(
    ("c_code", "words"),
    [
        ({**C_CODE, "profiled": "yes"}, "m.json: c_code: 'profiled' is the string 'yes', not true or false"),
        ({**C_CODE, "clang": 22}, "m.json: c_code: 'clang' is the number 22, not a string"),
        ({**C_CODE, "crates": [{"crate": "x"}]}, "m.json: c_code: crates[0]: 'compilers' is missing"),
        ("on", "m.json: 'c_code' is the string 'on', not an object"),
    ],
)
def test_an_ill_formed_c_code_of_a_manifest_refused(c_code: object, words: str) -> None:
    with pytest.raises(CheckFailed) as caught:
        parse(manifest(c_code=c_code), "m.json")
    assert caught.value.message == words
