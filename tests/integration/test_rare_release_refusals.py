"""Refusals of ``nox -s release`` and ``nox -s rebuild`` that a normal run never meets, made to happen with the
real cargo, rustc, llvm-profdata and llvm-bolt on the hello fixture, in a tagged git repository
(tests/integration/test_release.py's ``make_repo``).

Where the real tools cannot be made to fail that way, ``cargo`` on ``PATH`` is the wrapper of
tests/integration/test_rare_refusals.py: the real cargo, then what a broken build would do to its output (removes
the binary). A published file that is not the release's is a real one changed as a user's download could be,
with ``SHA256SUMS`` made to agree.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from recipes import report
from recipes.release.reproducible import sha256sums_text
from recipes.results import OptimiseResult
from recipes.store import sha256_file
from tests.conftest import assert_ok, assert_refused, run_nox
from tests.integration.test_rare_refusals import TRIPLE, _cargo_wrapper
from tests.integration.test_release import BASE, TAG, Release, git, make_repo

pytestmark = pytest.mark.slow


@pytest.mark.refuses("release-plain-build-left-no-binary")
def test_release_whose_plain_build_leaves_no_binary_refused(tmp_path: Path) -> None:
    """The pipeline passes; the plain build (no profile flags) is then made by the real cargo and its binary
    removed, as a broken build would leave it: the release stops before anything is stripped or written."""
    repo = make_repo(tmp_path)
    release = Release(tmp_path, repo, repo / "dist" / TAG, tmp_path / "work", tmp_path / "store", "")
    plain = release.work / "plain-target" / TRIPLE / "release" / "hello-pgo"
    wrappers = _cargo_wrapper(tmp_path / "wrapped")
    env = release.env(BREAK="remove", BREAK_FLAG="", BREAK_BINARY=str(plain))  # every build: only this path goes
    env["PATH"] = f"{wrappers}:{env['PATH']}"
    assert_refused(run_nox("release", env, [TAG]), f"the plain build left no binary at {plain}", "plain-build.log")
    assert "Finished" in (release.work / "logs" / "plain-build.log").read_text()  # cargo did build it
    assert isinstance(report.load(release.work).optimise, OptimiseResult)  # the PGO build before it passed
    assert not plain.exists()
    assert not release.dist.exists() and not (repo / "dist").exists()
    assert not (release.work / "release").exists()  # nothing stripped


@pytest.fixture(scope="module")
def bolt_released(tmp_path_factory: pytest.TempPathFactory) -> Release:
    """A release of hello with PGO_BOLT=1 (its PGO+BOLT tarball and .fdata beside the rest)."""
    root = tmp_path_factory.mktemp("bolt-release")
    repo = make_repo(root)
    released = Release(root, repo, repo / "dist" / TAG, root / "work", root / "store", "")
    text = assert_ok(run_nox("release", released.env(PGO_BOLT="1"), [TAG]))
    return Release(root, repo, released.dist, released.work, released.store, text)


def _doubled_fdata(text: str) -> str:
    """Another BOLT profile of the same binary: every branch count doubled (the last field of a line)."""
    lines = []
    for line in text.splitlines():
        *fields, count = line.split(" ")
        lines.append(" ".join([*fields, str(int(count) * 2)]) if fields and count.isdigit() else line)
    return "\n".join(lines) + "\n"


@pytest.mark.refuses("rebuild-bolt-profile-not-manifest")
def test_rebuild_with_another_bolt_profile_refused(bolt_released: Release, tmp_path: Path) -> None:
    """The downloaded .fdata is another profile, and SHA256SUMS lists its sha256 (every other file unchanged): the
    sums agree, the manifest's BOLT profile does not. Refused before any worktree or build."""
    download = bolt_released.download(tmp_path / "download")
    fdata = download / f"{BASE}-pgo-bolt.fdata"
    original = fdata.read_text()
    doubled = _doubled_fdata(original)
    assert doubled != original and len(doubled.splitlines()) == len(original.splitlines())
    fdata.write_text(doubled)
    sums = {p.name: sha256_file(p) for p in download.iterdir() if p.name != "SHA256SUMS"}
    (download / "SHA256SUMS").write_text(sha256sums_text(sums))
    subprocess.run(["sha256sum", "--check", "--strict", "SHA256SUMS"], cwd=download, check=True, capture_output=True)
    assert bolt_released.manifest()["bolt"]["profile_sha256"] != sha256_file(fdata)

    work = tmp_path / "w"
    proc = run_nox("rebuild", bolt_released.env(PGO_OUT=str(work)), [TAG, "--artefacts", str(download)])
    assert_refused(proc, f"the BOLT profile {fdata.name} is not the one the manifest records", "download it again")
    assert not (work / "rebuild").exists() and report.load(work).rebuild is None
    assert git(bolt_released.repo, "worktree", "list").count("\n") == 0  # no worktree was made
