"""recipes/release/manifest.py: a release's manifest read into typed records and written back byte for byte.

``tests/data/release/hello-pgo-bolt-manifest.json`` is a real one: ``nox -s release -- v1.0.0`` of the hello fixture
with ``PGO_BOLT=1`` (tests/integration/test_release.py's ``Release``), written by release.py before the manifest was
typed; release.py as it is now wrote the same bytes from the same build.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from recipes.errors import CheckFailed
from recipes.release import make as release
from recipes.release import manifest as release_manifest
from recipes.release.manifest import CCode, Manifest
from recipes.release.rebuild import released_missing
from tests.conftest import DATA
from tests.unit.test_provenance import manifest as fixture_manifest

REAL = DATA / "release" / "hello-pgo-bolt-manifest.json"
NAME = REAL.name


def real() -> dict[str, Any]:
    data = json.loads(REAL.read_text())
    assert isinstance(data, dict)
    return data


def test_a_real_manifest_round_trips_byte_for_byte() -> None:
    parsed = release_manifest.parse(real(), NAME)
    assert release_manifest.encode(parsed) == REAL.read_bytes()
    assert release_manifest.parse(json.loads(release_manifest.encode(parsed)), NAME) == parsed
    assert parsed.unrecorded == {"partial"}  # written before partial training's record


def test_a_real_manifest_read_by_attribute() -> None:
    parsed = release_manifest.parse(real(), NAME)
    assert parsed.names.manifest == "hello-pgo-v1.0.0-x86_64-unknown-linux-gnu-manifest.json"
    assert parsed.toolchain.rustc_vv.startswith("rustc 1.") and "LLVM version" in parsed.toolchain.rustc_vv
    assert parsed.artefacts.pgo.binary == "hello-pgo-v1.0.0-x86_64-unknown-linux-gnu-pgo/hello-pgo"
    assert parsed.artefacts.pgo.top == "hello-pgo-v1.0.0-x86_64-unknown-linux-gnu-pgo"
    assert parsed.artefacts.profile.binary is None
    assert parsed.artefacts.kinds() == ["plain", "pgo", "profile", "pgo_bolt", "bolt_profile"]
    assert parsed.bolt is not None and parsed.bolt.bolt_args[0] == "-reorder-blocks=ext-tsp"
    assert parsed.bolt.profile.functions_with_profile == 61
    assert parsed.c_code == CCode(profiled=False, clang=None, crates=())
    assert parsed.cpu_baseline is not None and parsed.cpu_baseline.run == ("collatz", "3000")
    assert parsed.remap_path_prefix[0] == ("/root/.cargo", "/cargo")
    assert parsed.training is not None and parsed.training.total_functions is not None


def test_the_release_summary_of_a_real_manifest() -> None:
    lines = release.summary_lines(release_manifest.parse(real(), NAME), Path("/dist"))
    assert lines[0] == "release v1.0.0 (c966d4ce4d50) in /dist"
    assert lines[4].startswith("  hello-pgo-v1.0.0-x86_64-unknown-linux-gnu-pgo-bolt.tar.gz  binary sha256 cb22f7")
    assert lines[-1] == "  x86_64-unknown-linux-gnu: both binaries glibc 2.34"


def test_a_manifest_of_before_keeps_its_keys_and_nulls() -> None:
    """test_provenance's manifest has none of the keys a release of before did not write (c_code, pgo_build…):
    they read as None and are left out again; a null that was there stays."""
    old = fixture_manifest()
    parsed = release_manifest.parse(old, "old.json")
    assert parsed.c_code is None and parsed.pgo_build is None and parsed.cpu_baseline is None
    assert parsed.unrecorded == {"c_code", "pgo_build", "max_glibc", "libc", "cpu_baseline", "partial"}
    assert release_manifest.to_json(parsed) == old
    musl = fixture_manifest(max_glibc=None, libc="static, needs no glibc", training=None)
    assert release_manifest.to_json(release_manifest.parse(musl, "musl.json")) == musl


def _refused(data: Any) -> str:
    with pytest.raises(CheckFailed) as caught:
        release_manifest.parse(data, NAME)
    line = caught.value.line()
    assert "\n" not in line
    return line


def test_the_manifest_of_another_schema_refused() -> None:
    data = real()
    data["schema"] = 2
    assert _refused(data).startswith(f"{NAME} has schema 2; this pgo-recipes reads manifests of schema 1")


def _edit(change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    data = copy.deepcopy(real())
    change(data)
    return data


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda m: m.pop("commit"), "'commit' is missing"),
        (lambda m: m.update(commit_time=1.5), "'commit_time' is the number 1.5, not an integer"),
        (lambda m: m["toolchain"].pop("rustc"), "toolchain: 'rustc' is missing"),
        (lambda m: m["toolchain"].update(rustc_vV=["x"]), "toolchain: 'rustc_vV' is a list, not a string"),
        (lambda m: m["artefacts"].pop("pgo"), "artefacts: 'pgo' is missing"),
        (lambda m: m["artefacts"]["pgo"].pop("binary_sha256"), "artefacts: pgo: 'binary_sha256' is missing"),
        (lambda m: m["bolt"].update(bolt_args="-icf"), "bolt: 'bolt_args' is the string '-icf', not a list"),
        (lambda m: m["bolt"].update(emit_relocs="yes"), "bolt: 'emit_relocs' is the string 'yes', not true or false"),
        (lambda m: m["bolt"]["profile"].pop("profile_branches"), "bolt: profile: 'profile_branches' is missing"),
        (
            lambda m: m["pgo_build"].update(stale_profile_warnings=None),
            "pgo_build: 'stale_profile_warnings' is null, not an integer",
        ),
        (lambda m: m["pgo_build"]["crate_metadata"].update(x=1), "pgo_build: crate_metadata: 'x' is the number 1"),
        (lambda m: m["cpu_baseline"].update(run="collatz"), "cpu_baseline: 'run' is the string 'collatz', not a list"),
        (lambda m: m.update(libc=2), "'libc' is the number 2, not a string"),
        (lambda m: m.update(c_code={"profiled": True, "crates": [7]}), "c_code: crates[0] is the number 7, not an"),
        (lambda m: m.update(profile_sha256="x"), "'profile_sha256' is 'x', not a sha256 (64 hex digits)"),
        (lambda m: m["bolt"].update(profile_sha256="y"), "bolt: 'profile_sha256' is 'y', not a sha256"),
        (lambda m: m.update(workload_sha256="z"), "'workload_sha256' is 'z', not a sha256"),
        # taken for a sha256 before ($ matches before a final newline), then unequal to SHA256SUMS' line
        (lambda m: m.update(profile_sha256="a" * 64 + "\n"), f"'profile_sha256' is '{'a' * 64}\\n', not a sha256"),
        (
            lambda m: m.update(c_code={"profiled": True, "crates": [{"crate": "ring"}]}),
            "c_code: crates[0]: 'compilers' is",
        ),
        (lambda m: (m.pop("commit"), m.update(libc=2)), "'commit' is missing"),  # two faults: the first key declared
        (lambda m: (m.update(libc=2), m["toolchain"].pop("strip")), "toolchain: 'strip' is missing"),
    ],
)
def test_a_missing_key_or_a_value_of_another_type_is_one_line_naming_the_file_and_the_key(
    change: Callable[[dict[str, Any]], object], words: str
) -> None:
    line = _refused(_edit(change))
    assert re.match(rf"{re.escape(NAME)}: {re.escape(words)}", line), line
    assert line.endswith("(it is not a manifest nox -s release writes: download it again)")


def test_what_is_not_an_object_refused() -> None:
    assert _refused([]).startswith(f"{NAME} is a list, not an object")


def test_a_manifest_is_frozen() -> None:
    parsed = release_manifest.parse(real(), NAME)
    with pytest.raises(AttributeError):
        parsed.tag = "v2.0.0"  # type: ignore[misc]
    assert isinstance(parsed, Manifest)


def test_the_identity_a_gather_reads_and_what_is_peeked_before_the_parse() -> None:
    data = json.loads(REAL.read_text())
    assert release_manifest.identity(data, "m.json") == release_manifest.Identity(data["tag"], data["commit"])
    assert release_manifest.identity({"tag": "v1", "commit": "c"}, "m.json") == release_manifest.Identity("v1", "c")
    for bad, words in (
        ([], "m.json is not a manifest (not a JSON object)"),
        ({"commit": "c"}, "m.json: 'tag' is missing"),
        ({"tag": "v1", "commit": None}, "m.json: 'commit' is null, not a string"),
    ):
        with pytest.raises(CheckFailed) as caught:
            release_manifest.identity(bad, "m.json")
        assert caught.value.message == words
    assert release_manifest.peek(data, "triple") == data["triple"]
    assert release_manifest.peek([data], "tag") is None
    assert release_manifest.peek({}, "tag") is None


def test_a_release_of_before_partial_training_rebuilds_as_it_was_built() -> None:
    # the real manifest was written before partial training: no 'partial' key, read as a build from the whole
    # profile, written back without the key, and its rebuild keeps the workload's ceiling of missing functions
    parsed = release_manifest.parse(real(), NAME)
    assert parsed.partial is None and "partial" in parsed.unrecorded
    assert "partial" not in json.loads(release_manifest.encode(parsed))
    assert released_missing(parsed) == {}


def test_a_partial_release_names_its_whole_profile_and_rebuilds_with_its_own_count() -> None:
    # the published profile is the partial one the build read: its rebuild may find as many functions without
    # profile data as the release's build did, never-run ones included (the binary is then compared byte for byte)
    partial = {"whole_profile_sha256": "ab" * 32, "never_run_records": 42, "never_run_functions": 32}
    data = real() | {"partial": partial}
    data["pgo_build"] = dict(data["pgo_build"], missing_profile_functions=3)
    parsed = release_manifest.parse(data, NAME)
    assert parsed.partial == release_manifest.Partial("ab" * 32, 42, 32)
    assert json.loads(release_manifest.encode(parsed))["partial"]["never_run_functions"] == 32
    assert released_missing(parsed) == {"max_missing": 35}
    bad = real() | {"partial": {"whole_profile_sha256": "not a sha", "never_run_records": 1, "never_run_functions": 1}}
    with pytest.raises(CheckFailed, match="whole_profile_sha256"):
        release_manifest.parse(bad, NAME)
