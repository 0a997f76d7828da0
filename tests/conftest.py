"""Shared helpers of the test suite: run nox sessions as a user would, on copies of the fixture crates."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from recipes import report
from recipes.results import Report, WorkloadRun
from recipes.train.trainer import VERIFY, Collect, RunSettings, run_workload
from recipes.workload import Workload, load_workload


def stage_names(records: Report) -> set[str]:
    """The stages that have a record."""
    return {f.name for f in dataclasses.fields(records) if getattr(records, f.name) is not None}


REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
DATA = REPO / "tests" / "data"

#: variables of the calling environment that would change what the sessions do
_SCRUB_PREFIXES = ("PGO_",)
_SCRUB = {"RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_RUSTFLAGS", "CARGO_TARGET_DIR", "LLVM_PROFILE_FILE"}


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without anything that configures the pipeline, plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(_SCRUB_PREFIXES) and k not in _SCRUB and not k.endswith("_RUSTFLAGS")
    }
    env.update(extra or {})
    return env


def train_workload(
    tmp_path: Path,
    workload: Path | Workload,
    binary: Path,
    *,
    scale: float = 1.0,
    timeout: float | None = None,
    profraw: bool = False,
    fdata_dir: Path | None = None,
    launcher: tuple[str, ...] = (),
    env: Mapping[str, str] | None = None,
) -> WorkloadRun:
    """The training's workload run on ``binary`` in this test's directory (work and logs under ``work/``, the
    profiles under ``profraw/`` with ``profraw``), as the train stage calls it; ``launcher`` before the binary
    (qemu-user: ``recipes.toolchain.emulation.launcher``), ``env`` added to the clean environment
    (``QEMU_LD_PREFIX``)."""
    collect = Collect.profraw(tmp_path / "profraw") if profraw else VERIFY
    if fdata_dir is not None:
        collect = Collect.fdata(fdata_dir)
    settings = RunSettings(
        base_env=clean_env(env),
        scratch=tmp_path / "work" / ("verify" if collect.verifying else "train"),
        logs=tmp_path / "work" / "logs",
        project_dir=REPO,
        scale=scale,
        timeout=timeout,
        launcher=launcher,
    )
    return run_workload(load_workload(workload) if isinstance(workload, Path) else workload, binary, settings, collect)


def written_records(work: Path) -> dict[str, Any]:
    """The stage records of ``<work>/report.json`` as written (JSON, the file's ``schema`` aside), after
    ``report.load`` read them as the pipeline does: every record fits its type."""
    report.load(work)
    records = json.loads(report.report_path(work).read_text())
    assert isinstance(records, dict)
    records.pop("schema")
    records.pop(report.CRATE, None)  # the crate identity the records are of (recipes/claim.py), not a record
    return records


def nox_argv(session: str, posargs: Sequence[str] = ()) -> list[str]:
    """The command line of ``nox -f <this repository's noxfile> -s <session> [-- posargs]``."""
    argv = [sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", session]
    return [*argv, "--", *posargs] if posargs else argv


def start_nox(session: str, env: Mapping[str, str], **popen: Any) -> subprocess.Popen[str]:
    """``nox -s <session>`` started from the repository root, not waited for (output piped unless told)."""
    options: dict[str, Any] = {
        "cwd": REPO,
        "stdout": subprocess.PIPE,
        "stderr": subprocess.STDOUT,
        "text": True,
        "stdin": subprocess.DEVNULL,
        **popen,
    }
    return subprocess.Popen(nox_argv(session), env=dict(env), **options)


def run_nox(
    session: str, env: Mapping[str, str], posargs: Sequence[str] = (), timeout: float = 1200
) -> subprocess.CompletedProcess[str]:
    """``nox -s <session> -- <posargs>`` from the repository root, as a user runs it."""
    return subprocess.run(
        nox_argv(session, posargs),
        cwd=REPO,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def output(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stdout + proc.stderr


def assert_ok(proc: subprocess.CompletedProcess[str]) -> str:
    text = output(proc)
    assert proc.returncode == 0, text[-4000:]
    assert "Traceback" not in text, text[-4000:]
    return text


def assert_refused(proc: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """A known failure: non-zero exit, no traceback, one line naming the problem."""
    text = output(proc)
    assert proc.returncode != 0, text[-4000:]
    assert "Traceback" not in text, text[-4000:]
    errors = [line for line in text.splitlines() if "aborted:" in line or "failed:" in line]
    assert errors, text[-4000:]
    for fragment in fragments:
        assert fragment in errors[-1], f"{fragment!r} not in {errors[-1]!r}"
    return errors[-1]


def copy_fixture(name: str, dest: Path) -> Path:
    """A copy of tests/fixtures/<name> (without build output); returns its Cargo.toml."""
    target = dest / name
    shutil.copytree(FIXTURES / name, target, ignore=shutil.ignore_patterns("target"))
    return target / "Cargo.toml"


class Pipeline:
    """One fixture crate with its own work dir and profile store."""

    def __init__(self, tmp_path: Path, fixture: str = "hello", workload: str | None = None) -> None:
        self.root = tmp_path
        self.manifest = copy_fixture(fixture, tmp_path)
        self.crate_dir = self.manifest.parent
        self.work = tmp_path / "work"
        self.store = tmp_path / "store"
        self.workload = workload or fixture

    def env(self, **extra: str) -> dict[str, str]:
        return clean_env(
            {
                "PGO_MANIFEST": str(self.manifest),
                "PGO_WORKLOAD": self.workload,
                "PGO_OUT": str(self.work),
                "PGO_PROFILE_STORE": str(self.store),
                **extra,
            }
        )

    def nox(self, session: str, *posargs: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return run_nox(session, self.env(**extra), posargs)


@pytest.fixture
def hello(tmp_path: Path) -> Pipeline:
    return Pipeline(tmp_path, "hello")
