"""The noxfile's inline script metadata (PEP 723), which nox reads to run it where pgo-recipes is not installed,
declares what pyproject.toml's [project] dependencies are, so the two ways of running the sessions get the same
packages; and ``python noxfile.py`` runs nox."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from typing import Any

from tests.conftest import REPO


def _script_metadata() -> dict[str, Any]:
    text = (REPO / "noxfile.py").read_text(encoding="utf-8")
    block = re.search(r"^# /// script\n((?:#.*\n)*?)# ///$", text, re.MULTILINE)
    assert block, "noxfile.py has no `# /// script` block"
    return tomllib.loads("".join(line[2:] + "\n" for line in block[1].splitlines()))


def test_the_noxfiles_script_dependencies_are_pyprojects() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    # a dependency marked for Pythons older than the project's own requires-python never applies to the script
    applicable = sorted(d for d in project["dependencies"] if "python_version <" not in d)
    assert sorted(_script_metadata()["dependencies"]) == applicable


def test_python_noxfile_lists_the_sessions() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "noxfile.py"), "-l"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "* tests" in done.stdout and "- pgo" in done.stdout
