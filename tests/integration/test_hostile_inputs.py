"""Hostile input files through nox as a user runs it: each is one line and a non-zero exit, before any build, never
a traceback (issue 19). The readers' own fuzz tests are in tests/unit (test_report, test_workload, test_config,
test_cpu, test_bolt)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, Pipeline, assert_refused, clean_env, copy_fixture

CAPTURED = REPO / "tests" / "data" / "report-demo-server-bolt.json"


def _no_build(p: Pipeline) -> None:
    assert not (p.crate_dir / "target").exists()
    assert not (p.work / "generate-target").exists()


def _nox_in(project: Path, session: str, *posargs: str) -> subprocess.CompletedProcess[str]:
    """``nox -f path/to/pgo-recipes/noxfile.py -s <session>`` from the project's root (its pyproject.toml)."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "nox",
            "-f",
            str(REPO / "noxfile.py"),
            "-s",
            session,
            *(["--", *posargs] if posargs else []),
        ],
        cwd=project,
        env=clean_env({}),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.refuses("workload-file-not-utf-8-text")
def test_a_workload_that_is_not_utf8_refused_before_anything_is_built(hello: Pipeline, tmp_path: Path) -> None:
    workload = tmp_path / "latin1.toml"
    text = (REPO / "profiles" / "hello.toml").read_text().replace("hello-pgo:", "hello-pgo (d\u00e9mo):", 1)
    workload.write_bytes(text.encode("latin-1"))
    line = assert_refused(hello.nox("pgo", PGO_WORKLOAD=str(workload)), f"the workload {workload} is not UTF-8 text")
    assert "(byte 0xe9 on line 3, offset 121)" in line and "save it as UTF-8 text" in line
    _no_build(hello)


@pytest.mark.refuses("pyproject-toml-not-utf-8-text", "pyproject-toml-tool-not-table")
@pytest.mark.parametrize(
    ("pyproject", "fragment"),
    [
        (b'[project]\nname = "caf\xe9"\n', "pyproject.toml is not UTF-8 text (byte 0xe9 on line 2, offset 21)"),
        (b"tool = 3\n", "pyproject.toml: tool must be a table, not the number 3 (write its tables as [tool.<name>])"),
    ],
)
def test_a_pyproject_that_is_not_utf8_or_whose_tool_is_not_a_table_refused(
    tmp_path: Path, pyproject: bytes, fragment: str
) -> None:
    project = copy_fixture("hello", tmp_path).parent
    (project / "pyproject.toml").write_bytes(pyproject)
    assert_refused(_nox_in(project, "instrument"), f"{project / 'pyproject.toml'}", fragment)
    assert not (project / "target").exists()


@pytest.mark.refuses("stage-record-lacks-key-readers-need-succeeded")
@pytest.mark.parametrize(
    ("stage", "key", "session", "needs"),
    [("train", "profraw", "merge", "train"), ("optimise", "binary", "pgo-test", "optimise")],
)
def test_a_report_record_without_a_key_refuses_the_next_stage(
    hello: Pipeline, stage: str, key: str, session: str, needs: str
) -> None:
    """report.json whose last record lacks what the next stage reads: that stage refuses it in one line naming the
    report, the stage and the key, and records why it failed."""
    captured = json.loads(CAPTURED.read_text())
    records = {name: captured[name] for name in ("instrument", "train", "merge", "optimise")}
    del records[stage][key]
    hello.work.mkdir()
    (hello.work / "report.json").write_text(json.dumps({"schema": 1, **records}))
    assert_refused(
        hello.nox(session), f"{hello.work / 'report.json'}: {needs}: '{key}' is missing", f"run `nox -s {needs}` again"
    )
    recorded = json.loads((hello.work / "report.json").read_text())["test" if session == "pgo-test" else session]
    assert f"{needs}: '{key}' is missing" in recorded["failed"] and "running" not in recorded
    _no_build(hello)


@pytest.mark.refuses("cpu-baseline-binary-not-executable", "cpu-baseline-binary-not-elf-script-only")
def test_cpu_baseline_on_a_file_that_is_not_executable_refused(hello: Pipeline, tmp_path: Path) -> None:
    binary = tmp_path / "hello-pgo"
    binary.write_bytes(b"not a program")
    assert_refused(hello.nox("cpu-baseline", "--binary", str(binary)), f"{binary} is not executable (chmod +x it")
    binary.chmod(0o755)
    assert_refused(hello.nox("cpu-baseline", "--binary", str(binary)), f"{binary} is not an ELF binary")
    assert not (hello.work / "cpu-baseline").exists()
