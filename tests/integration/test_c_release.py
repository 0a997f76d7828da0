"""A release of the fixture ``csys`` (its hot loops in C and C++, built by cc-rs) whose C is profiled by clang-22:
the manifest and the provenance record it, the C's paths are remapped (``-ffile-prefix-map``), the plain build's C
is compiled by the same clang without the profile, and the rebuild in another directory follows the manifest's
setting (not this machine's) and gives the published binary byte for byte; a recorded clang that is not here is
refused before anything is built."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from recipes import report
from recipes.release.reproducible import sha256sums_text, tar_member
from recipes.store import sha256_file
from recipes.toolchain.cflags import read_object
from tests.conftest import FIXTURES, REPO, assert_ok, assert_refused, clean_env, run_nox
from tests.integration.test_release import git

pytestmark = pytest.mark.slow

TAG = "v1.0.0"
TRIPLE = "x86_64-unknown-linux-gnu"
BASE = f"csys-{TAG}-{TRIPLE}"


def make_repo(root: Path, where: str = "__FILE__") -> Path:
    """A git repository with a copy of csys whose C holds its own absolute path (``__FILE__`` of a file named by
    its absolute path): a path only ``-ffile-prefix-map`` can take out of the binary. ``where="CSYS_WHERE"``: the
    checkout's path as a string the build script defines, which no remapping reaches."""
    repo = root / "repo"
    shutil.copytree(FIXTURES / "csys", repo / "csys", ignore=shutil.ignore_patterns("target"))
    (repo / "profiles").mkdir()
    shutil.copy(REPO / "profiles" / "csys.toml", repo / "profiles" / "csys.toml")
    crate = repo / "csys"
    build = crate / "build.rs"
    text = build.read_text()
    assert '.file("csrc/hot.c")' in text
    build.write_text(
        text.replace(
            '.file("csrc/hot.c")',
            '.file(concat!(env!("CARGO_MANIFEST_DIR"), "/csrc/hot.c"))'
            '.define("CSYS_WHERE", Some(concat!("\\"", env!("CARGO_MANIFEST_DIR"), "\\"")))',
        )
    )
    with (crate / "csrc" / "hot.c").open("a") as hot:
        hot.write(f"\nconst char *csys_file(void) {{\n    return {where};\n}}\n")
    main = crate / "src" / "main.rs"
    text = main.read_text()
    text = text.replace(
        "    fn csys_cold(x: u32) -> u32;\n", "    fn csys_cold(x: u32) -> u32;\n    fn csys_file() -> *const i8;\n"
    )
    text = text.replace(
        '        Some("cold")',
        '        Some("file") => println!("{:?}", unsafe { std::ffi::CStr::from_ptr(csys_file()) }),\n'
        '        Some("cold")',
    )
    main.write_text(text)
    (repo / ".gitignore").write_text("/dist/\n**/target/\n")
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "csys")
    git(repo, "tag", "-a", TAG, "-m", TAG)
    return repo


@dataclass(frozen=True)
class Released:
    root: Path
    repo: Path
    work: Path
    store: Path
    text: str

    @property
    def dist(self) -> Path:
        return self.repo / "dist" / TAG

    def env(self, **extra: str) -> dict[str, str]:
        return clean_env(
            {
                "PGO_MANIFEST": str(self.repo / "csys" / "Cargo.toml"),
                "PGO_WORKLOAD": "csys",
                "PGO_OUT": str(self.work),
                "PGO_PROFILE_STORE": str(self.store),
                **extra,
            }
        )

    def manifest(self) -> dict[str, Any]:
        data = json.loads((self.dist / f"{BASE}-manifest.json").read_text())
        assert isinstance(data, dict)
        return data


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Released:
    root = tmp_path_factory.mktemp("crelease")
    repo = make_repo(root)
    env = Released(root, repo, root / "work", root / "store", "").env()
    text = assert_ok(run_nox("release", env, [TAG]))
    return Released(root, repo, root / "work", root / "store", text)


def _clang_line() -> str:
    done = subprocess.run(["clang-22", "--version"], capture_output=True, text=True, check=True)
    return done.stdout.splitlines()[0].strip()


def _binary(released: Released, kind: str) -> bytes:
    artefact = released.manifest()["artefacts"][kind]
    return tar_member(released.dist / artefact["file"], artefact["binary"])


def test_the_manifest_and_the_provenance_record_the_profiled_c_and_its_clang(released: Released) -> None:
    c_code = released.manifest()["c_code"]
    assert c_code["profiled"] is True and c_code["clang"] == _clang_line(), c_code
    (crate,) = c_code["crates"]
    assert crate["crate"] == "csys" and all("clang version 22." in c for c in crate["compilers"]), crate
    for kind in ("plain", "pgo", "profile"):
        name = f"{released.manifest()['artefacts'][kind]['file']}.intoto.json"
        definition = json.loads((released.dist / name).read_text())["predicate"]["buildDefinition"]
        assert definition["internalParameters"]["c_code"] == {"profiled": True, "crates": ["csys"]}
        deps = {d["name"]: d for d in definition["resolvedDependencies"]}
        version = _clang_line().split("clang version ")[1].split()[0]
        assert deps["clang"] == {
            "name": "clang",
            "uri": f"pkg:generic/clang@{version}",
            "annotations": {"version": _clang_line()},
        }
    assert f"  the C of csys: profiled, by {_clang_line()}" in released.text
    text = assert_ok(run_nox("verify", released.env(), [TAG]))
    assert f"verified {TAG}" in text


def test_the_c_paths_are_remapped_in_both_binaries(released: Released) -> None:
    """``__FILE__`` of hot.c is the checkout's absolute path: remapped to /build/src in the plain and the PGO binary
    (the release's own check, that no build machine's path is left, passed)."""
    for kind in ("plain", "pgo"):
        data = _binary(released, kind)
        assert b"/build/src/csys/csrc/hot.c" in data, kind
        assert str(released.repo).encode() not in data and str(released.work).encode() not in data, kind
    instrumented = report.require(released.work, "instrument", "the test").binary.read_bytes()
    assert b"/build/src/csys/csrc/hot.c" in instrumented  # the training ran C of the same (remapped) names
    command = next(  # cc-rs's commands are in the optimise build's log (cargo -vv)
        line
        for line in (released.work / "logs" / "optimise-build.log").read_text().splitlines()
        if "running:" in line and "csrc/hot.c" in line
    )
    assert f'"-ffile-prefix-map={released.repo}=/build/src"' in command, command


def test_the_plain_builds_c_is_compiled_by_the_same_clang_without_the_profile(released: Released) -> None:
    objects = sorted((released.work / "plain-target" / TRIPLE / "release" / "build").glob("csys-*/out/*.o"))
    assert len(objects) == 2, objects
    for path in objects:
        seen = read_object(path)
        assert seen is not None and "clang version 22." in seen.compiler and not seen.instrumented, seen
    log = (released.work / "logs" / "plain-build.log").read_text()
    assert "-fprofile-use" not in log and "-fprofile-generate" not in log
    # the host's C (hostc, a build-dependency) keeps its own compiler, without the remap flags
    for path in (released.work / "plain-target" / "release" / "build").glob("hostc-*/out/*.o"):
        seen = read_object(path)
        assert seen is not None and seen.compiler.startswith("GCC:"), seen


def test_the_rebuild_follows_the_manifests_c_setting_and_matches(released: Released, tmp_path: Path) -> None:
    """PGO_C=0 here: the rebuild still profiles the C as the manifest says, and gives the published binary."""
    download = tmp_path / "download"
    shutil.copytree(released.dist, download)
    env = released.env(PGO_OUT=str(tmp_path / "work"), PGO_C="0")
    text = assert_ok(run_nox("rebuild", env, [TAG, "--artefacts", str(download)]))
    pgo = released.manifest()["artefacts"]["pgo"]
    assert f"match     {pgo['binary']}  rebuilt {pgo['binary_sha256']}" in text and "mismatch" not in text, text[-3000:]
    report = json.loads((tmp_path / "work" / "rebuild" / TAG / "report.json").read_text())
    record = report["optimise"]["c_code"]
    assert record["languages"]["C"]["profiled"] is True and record["setting"] == "on", record
    (crate,) = record["crates"]
    assert crate["profile_flags"] is True and "csys_checksum" in crate["functions_with_profile"], crate


def _edit_c_code(download: Path, **changes: Any) -> None:
    """The downloaded manifest's ``c_code`` changed, SHA256SUMS made to agree."""
    path = download / f"{BASE}-manifest.json"
    manifest = json.loads(path.read_text())
    manifest["c_code"].update(changes)
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    sums = {p.name: sha256_file(p) for p in download.iterdir() if p.name != "SHA256SUMS"}
    (download / "SHA256SUMS").write_text(sha256sums_text(sums))


@pytest.mark.refuses("rebuild-release-c-profiled-clang-whose-major")
def test_a_recorded_clang_that_is_not_here_refused_before_the_rebuild(released: Released, tmp_path: Path) -> None:
    download = tmp_path / "download"
    shutil.copytree(released.dist, download)
    _edit_c_code(download, clang="Debian clang version 99.0.1 (1~deb12u1)")
    env = released.env(PGO_OUT=str(tmp_path / "w"))
    line = assert_refused(
        run_nox("rebuild", env, [TAG, "--artefacts", str(download)]),
        "the release compiled its C with Debian clang version 99.0.1 (1~deb12u1) and the profile; there is no "
        "clang-99 here",
        "`apt-get install clang-99`",
    )
    assert line.count("\n") == 0
    assert not (tmp_path / "w" / "rebuild").exists(), "refused before anything was built"


def test_the_rebuild_follows_a_manifest_whose_c_was_not_profiled(released: Released, tmp_path: Path) -> None:
    """The manifest edited to say the C was not profiled: the rebuild compiles it without clang and the profile (as
    PGO_C=0), whatever this machine's default, and so does not give the published binary."""
    download = tmp_path / "download"
    shutil.copytree(released.dist, download)
    _edit_c_code(download, profiled=False, clang=None)
    proc = run_nox("rebuild", released.env(PGO_OUT=str(tmp_path / "w")), [TAG, "--artefacts", str(download)])
    assert_refused(proc, f"the rebuilt PGO binary of {TAG} differs from the published one")
    record = json.loads((tmp_path / "w" / "rebuild" / TAG / "report.json").read_text())["optimise"]["c_code"]
    assert record["setting"] == "off" and record["languages"]["C"]["off"] == "PGO_C=0", record
    (crate,) = record["crates"]
    assert crate["profile_flags"] is False and all(c.startswith("GCC:") for c in crate["compilers"]), crate


def test_a_release_whose_c_holds_a_path_no_remap_reaches_refused(tmp_path: Path) -> None:
    """The checkout's path as a C string (a define of the build script): the release's check of the binaries finds it
    in the C too."""
    repo = make_repo(tmp_path, where="CSYS_WHERE")
    env = Released(tmp_path, repo, tmp_path / "work", tmp_path / "store", "").env()
    assert_refused(run_nox("release", env, [TAG]), "binary still contains the build machine's path", str(repo))
    assert not (repo / "dist").exists()
