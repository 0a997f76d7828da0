"""A crate's own project adopts the pipeline, both ways, from a temporary directory outside this repository:
``nox -f path/to/pgo-recipes/noxfile.py`` run from the project's root, and pgo-recipes installed with pip plus a
three-line noxfile. Either way the sessions read the project's own ``[tool.pgo]`` and ``profiles/``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from tests.conftest import REPO, assert_ok, assert_refused, clean_env, copy_fixture, output

pytestmark = pytest.mark.slow

PYPROJECT = """\
[tool.pgo]
manifest = "Cargo.toml"
workload = "mine"
out = "pgo-work"
store = "pgo-store"
"""

#: the project's own workload; {project} must be the project, not pgo-recipes
WORKLOAD = """\
[workload]
description = "hello-pgo, trained from its own project"
min_functions = 3

[[instance]]
name = "cli"

[[instance.phase]]
name = "where"
kind = "command"
args = ["words", "{project}"]
output = "keep"

[[instance.phase]]
name = "primes"
kind = "command"
args = ["primes", "5000"]
runs = 2
"""

NOXFILE = """\
import recipes.sessions

recipes.sessions.register_pgo_sessions()
"""


def _project(tmp_path: Path) -> Path:
    """A user's project outside this repository: the hello crate, its [tool.pgo] and profiles/mine.toml."""
    project = copy_fixture("hello", tmp_path / "elsewhere").parent
    assert not project.is_relative_to(REPO)
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "profiles").mkdir()
    (project / "profiles" / "mine.toml").write_text(WORKLOAD)
    return project


def _nox(
    argv: Sequence[str],
    project: Path,
    session: str,
    env: Mapping[str, str] | None = None,
    posargs: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*argv, "-s", session, *(["--", *posargs] if posargs else [])],
        cwd=project,
        env=clean_env(env),
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _nox_f(project: Path, session: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``nox -f path/to/pgo-recipes/noxfile.py -s <session>`` from the project's root."""
    return _nox([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py")], project, session, env)


def _check_trained_in_project(project: Path, text: str) -> None:
    report = json.loads((project / "pgo-work" / "report.json").read_text())
    assert report["schema"] == 1
    assert set(report) >= {"instrument", "train", "merge", "optimise"}
    assert report["train"]["workload"] == str(project / "profiles" / "mine.toml")
    assert [p["name"] for p in report["train"]["phases"]] == ["where", "primes"]
    binary = Path(report["optimise"]["binary"])
    assert binary.is_relative_to(project), binary  # the crate's target dir, or the work dir's checked copy
    assert binary.name == "hello-pgo"
    assert Path(report["optimise"]["store_path"]).parent == project / "pgo-store"
    # {project} is the user's project: the binary printed it (lower-cased) as one word, kept in the phase's log
    log = (project / "pgo-work" / "logs" / "train-cli-where.log").read_text()
    assert f"{str(project).lower()} 1" in log
    assert "demo-server" not in text


def test_nox_f_from_the_project_reads_its_pyproject_and_profiles(tmp_path: Path) -> None:
    project = _project(tmp_path)
    text = assert_ok(_nox_f(project, "pgo", PGO_TRAIN_SCALE="0.5"))
    _check_trained_in_project(project, text)


@pytest.mark.refuses("value-not-what-setting-takes-not-number")
def test_nox_f_refuses_a_bad_value_of_the_projects_pyproject(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "pyproject.toml").write_text(PYPROJECT + "train_scale = inf\n")
    line = assert_refused(_nox_f(project, "instrument"), f"{project / 'pyproject.toml'} [tool.pgo] train_scale")
    assert "'inf' is not a finite number: expected a number above 0" in line
    assert not (project / "pgo-work").exists()


@pytest.mark.refuses("pyproject-toml-nul-character", "pyproject-toml-nested-too-deeply")
@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ('features = "a\\u0000b"\n', ": tool.pgo.features holds a NUL character (\\0), which no argument"),
        ("[project]\nx = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n", ": nested too deeply to read"),
    ],
    ids=["nul-in-tool-pgo", "nested-too-deeply"],
)
def test_a_pyproject_no_session_can_read_is_one_line_before_any_build(
    tmp_path: Path, extra: str, fragment: str
) -> None:
    """Issue 34 (item 9): both were tracebacks; tests/unit/test_config.py reads them, this is ``nox -s pgo`` from
    the project whose pyproject.toml it is."""
    project = _project(tmp_path)
    (project / "pyproject.toml").write_text(PYPROJECT + extra)
    proc = _nox_f(project, "pgo")
    assert_refused(proc, f"{project / 'pyproject.toml'}{fragment}")
    assert "Traceback" not in output(proc) and "RecursionError" not in output(proc)
    assert not (project / "pgo-work").exists() and not (project / "target").exists()


@pytest.mark.refuses("value-not-what-setting-takes-not-number")
@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("PGO_TRAIN_SCALE", "inf", "PGO_TRAIN_SCALE: 'inf' is not a finite number: expected a number above 0"),
        ("PGO_MIN_FUNCTIONS", "abc", "PGO_MIN_FUNCTIONS: 'abc' is not a whole number: expected a whole number"),
    ],
)
def test_a_bad_number_is_one_line_before_any_build(tmp_path: Path, name: str, value: str, fragment: str) -> None:
    project = _project(tmp_path)
    proc = _nox_f(project, "pgo", **{name: value})
    line = assert_refused(proc, fragment, f"for example {name}=")
    assert "Traceback" not in output(proc)
    assert len([x for x in output(proc).splitlines() if fragment in x]) == 1, line
    assert not (project / "pgo-work").exists()
    assert not (project / "target").exists()


@pytest.mark.parametrize(
    ("session", "posargs", "fragment"),
    [
        ("verify", ["v0.1.0", "--artefacts", "rel"], "no artefacts of v0.1.0 at {project}/rel ("),
        ("image", ["v0.1.0", "--artefacts", "rel"], "no artefacts of v0.1.0 at {project}/rel ("),
        ("release", ["v0.1.0", "--gather", "rel"], "no artefacts of v0.1.0 at {project}/rel ("),
        ("cpu-baseline", ["--binary", "rel/hello-pgo"], "no binary at {project}/rel/hello-pgo ("),
    ],
)
def test_a_relative_path_of_a_session_option_is_the_projects(
    tmp_path: Path, session: str, posargs: list[str], fragment: str
) -> None:
    """Before, a relative --artefacts, --gather or --binary was taken from nox's own folder, the noxfile's: from
    pgo-recipes' checkout under ``nox -f`` (a release written there, another folder verified)."""
    project = _project(tmp_path)
    proc = _nox([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py")], project, session, posargs=posargs)
    assert_refused(proc, fragment.format(project=project))
    assert not (REPO / "rel").exists()


def test_a_workload_name_missing_from_the_project_is_pgo_recipes_own(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "pyproject.toml").write_text(PYPROJECT.replace('"mine"', '"hello"'))
    assert_ok(_nox_f(project, "instrument"))
    assert_ok(_nox_f(project, "train", PGO_TRAIN_SCALE="0.1"))
    report = json.loads((project / "pgo-work" / "report.json").read_text())
    assert report["train"]["workload"] == str(REPO / "profiles" / "hello.toml")


def _pip_installed(tmp_path: Path) -> Path:
    """A venv (with the system's site-packages) where a copy of this repository is pip-installed."""
    source = tmp_path / "pgo-recipes"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(REPO / "recipes", source / "recipes", ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", str(source)], capture_output=True, text=True, check=False
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr
    return python


def test_pip_installed_with_a_three_line_noxfile(tmp_path: Path) -> None:
    python = _pip_installed(tmp_path)
    project = _project(tmp_path)
    (project / "noxfile.py").write_text(NOXFILE)
    where = subprocess.run(
        [python, "-c", "import recipes.sessions; print(recipes.sessions.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(tmp_path / "venv")  # the installed copy, not this checkout
    listed = assert_ok(_nox([str(python), "-m", "nox"], project, "pgo", {"PGO_TRAIN_SCALE": "0.5"}))
    _check_trained_in_project(project, listed)
    assert "Sessions defined in " + str(project / "noxfile.py") in assert_ok(
        subprocess.run([str(python), "-m", "nox", "-l"], cwd=project, capture_output=True, text=True, check=False)
    )
