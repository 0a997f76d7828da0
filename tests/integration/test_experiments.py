"""The reference's three experiments on the layered fixture (a binary and two path dependencies, one with a
build script whose generated code has its absolute path in the target dir):

1. two work directories give the same binary (``nox -s determinism``: two worktrees, the profile alone);
2. another profile on the same target directory recompiles every crate of the target;
3. the first profile again reuses them and gives the first binary.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from recipes.release.reproducible import unit_states
from recipes.store import sha256_file
from tests.conftest import FIXTURES, assert_ok, assert_refused, clean_env, run_nox
from tests.integration.test_release import git

pytestmark = pytest.mark.slow

CRATES = {"shapes", "tally", "layered-app"}


@dataclass(frozen=True)
class Layered:
    root: Path
    repo: Path
    work: Path
    store: Path

    def env(self, **extra: str) -> dict[str, str]:
        return clean_env(
            {
                "PGO_MANIFEST": str(self.repo / "layered" / "Cargo.toml"),
                "PGO_WORKLOAD": str(self.repo / "profiles" / "layered.toml"),
                "PGO_OUT": str(self.work),
                "PGO_PROFILE_STORE": str(self.store),
                **extra,
            }
        )

    def report(self) -> dict[str, Any]:
        data = json.loads((self.work / "report.json").read_text())
        assert isinstance(data, dict)
        return data

    @property
    def binary(self) -> Path:
        return self.repo / "layered" / "target" / "x86_64-unknown-linux-gnu" / "release" / "layered"


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Layered:
    """The layered crate in a git repository, through the whole pipeline once (no remapping: a plain pgo)."""
    root = tmp_path_factory.mktemp("layered")
    repo = root / "repo"
    shutil.copytree(FIXTURES / "layered", repo / "layered", ignore=shutil.ignore_patterns("target", "workload.toml"))
    (repo / "profiles").mkdir()
    shutil.copy(FIXTURES / "layered" / "workload.toml", repo / "profiles" / "layered.toml")
    (repo / ".gitignore").write_text("**/target/\n")
    git(root, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "layered")
    layered = Layered(root, repo, root / "work", root / "store")
    assert_ok(run_nox("pgo", layered.env()))
    return layered


def test_two_work_directories_give_the_same_binary(trained: Layered) -> None:
    text = assert_ok(run_nox("determinism", trained.env()))
    result = trained.report()["determinism"]
    assert result["identical"] is True
    first, second = (Path(p) for p in result["binaries"])
    assert first.read_bytes() == second.read_bytes()
    assert result["binary_sha256"][0] in text
    # each was built in its own worktree at its own path, from the same store path
    logs = [(trained.work / "determinism" / n / "logs" / "optimise-build.log").read_text() for n in ("first", "second")]
    sources = [next(w for w in log.split() if w.startswith("--remap-path-prefix=/tmp/pgo-determinism")) for log in logs]
    assert sources[0] != sources[1]
    # the control: without the remap flags the build machine's path is in the binary (pgo of the checkout)
    generated = str(trained.repo / "layered" / "target" / "x86_64-unknown-linux-gnu" / "release" / "build")
    assert generated.encode() in trained.binary.read_bytes()
    for binary in (first, second):
        strings = subprocess.run(["strings", "-n", "6", binary], capture_output=True, text=True, check=True).stdout
        assert "/build/src/layered/target/x86_64-unknown-linux-gnu/release/build/shapes-" in strings  # remapped
        assert "/tmp/" not in strings and str(trained.root) not in strings
    # the worktrees are gone
    assert git(trained.repo, "worktree", "list").count("\n") == 0


def test_another_profile_recompiles_every_crate_and_the_first_profile_reuses_them(
    trained: Layered, tmp_path: Path
) -> None:
    first_profile = trained.work / "layered.profdata"
    first_binary = trained.report()["optimise"]["binary_sha256"]
    assert sha256_file(trained.binary) == first_binary
    copy = tmp_path / "first.profdata"  # the same profile under another name: the store path is by content
    shutil.copy(first_profile, copy)
    other = tmp_path / "other.profdata"  # the same functions, every count doubled
    subprocess.run(["llvm-profdata-22", "merge", f"--weighted-input=2,{first_profile}", "-o", str(other)], check=True)
    assert sha256_file(other) != sha256_file(first_profile)
    work = tmp_path / "work"

    def optimise(profile: Path) -> tuple[dict[str, str], str, str]:
        assert_ok(run_nox("optimise", trained.env(PGO_PROFDATA=str(profile), PGO_OUT=str(work))))
        log = (work / "logs" / "optimise-build.log").read_text()
        result = json.loads((work / "report.json").read_text())["optimise"]
        return unit_states(log), result["binary_sha256"], result["store_path"]

    states, other_binary, other_store = optimise(other)
    assert states == dict.fromkeys(CRATES, "Compiling"), "another profile: every crate of the target compiled again"
    assert other_binary != first_binary
    states, again_binary, again_store = optimise(copy)
    assert states == {"shapes": "Fresh", "tally": "Fresh", "layered-app": "Compiling"}, (
        "the first profile again: the dependencies reused (the package itself is always cleaned)"
    )
    assert again_binary == first_binary
    assert again_store == trained.report()["optimise"]["store_path"] != other_store


@pytest.mark.refuses("stage-run-without-result-stage-before", "determinism-dirty-worktree")
def test_determinism_refusals(trained: Layered, tmp_path: Path) -> None:
    assert_refused(
        run_nox("determinism", trained.env(PGO_OUT=str(tmp_path / "empty"))), "determinism needs the result of merge"
    )
    stray = trained.repo / "layered" / "stray.txt"
    stray.write_text("not committed\n")
    try:
        assert_refused(run_nox("determinism", trained.env()), "is dirty", "layered/stray.txt")
    finally:
        stray.unlink()


@pytest.mark.refuses("path-dependency-outside-workspace-root")
def test_path_dependency_outside_the_workspace_refused(tmp_path: Path) -> None:
    """Its crate identity is a hash of its absolute path: two checkouts give two binaries (tried: 24 bytes)."""
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "layered" / "shapes", repo / "shapes", ignore=shutil.ignore_patterns("target"))
    (repo / "app" / "src").mkdir(parents=True)
    (repo / "app" / "src" / "main.rs").write_text('fn main() { println!("{}", shapes::area("square", 2.0)); }\n')
    (repo / "app" / "Cargo.toml").write_text(
        '[package]\nname = "app"\nversion = "0.1.0"\nedition = "2021"\n\n'
        '[dependencies]\nshapes = { path = "../shapes" }\n\n[workspace]\n'
    )
    (repo / ".gitignore").write_text("**/target/\nCargo.lock\n")
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "app")
    git(repo, "tag", "-a", "v0.1.0", "-m", "v0.1.0")
    env = clean_env({"PGO_MANIFEST": str(repo / "app" / "Cargo.toml"), "PGO_OUT": str(tmp_path / "work")})
    env["PGO_PROFILE_STORE"] = str(tmp_path / "store")
    line = assert_refused(run_nox("release", env, ["v0.1.0"]), "shapes", "outside the workspace root", "members")
    assert str(repo / "shapes" / "Cargo.toml") in line
