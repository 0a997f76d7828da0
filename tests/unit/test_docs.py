"""The documentation: the site builds strictly (no broken link or anchor, no page left out of its nav), the relative
links of README.md and CONTRIBUTING.md point at files that exist, and the README names every setting and session."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import noxfile
from recipes.config import SETTINGS
from recipes.sessions import PGO_SESSIONS
from tests.conftest import REPO

#: a Markdown link or image: ``[text](target)``, ``![alt](target "title")``
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*([^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
#: a fenced code block, whose brackets are not links
_FENCE = re.compile(r"^(`{3,}|~{3,}).*?^\1", re.MULTILINE | re.DOTALL)


def relative_links(text: str) -> list[str]:
    """The link targets of a Markdown text that are paths in the repository (no URL, no anchor of the same page)."""
    text = _FENCE.sub("", text)
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code: `[x](y)` quoted is not a link
    return [
        target
        for target in _LINK.findall(text)
        if not target.startswith("#") and not re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target)
    ]


def test_relative_links_are_found() -> None:
    text = (
        '[a](docs/a.md#x) ![b](b.png) [c](https://x.org) [d](#top) `[e](e.md)` [f](f.md "title")\n```\n[h](h.md)\n```\n'
    )
    assert relative_links(text) == ["docs/a.md#x", "b.png", "f.md"]


@pytest.mark.parametrize("name", ["README.md", "CONTRIBUTING.md"])
def test_every_relative_link_points_at_a_file(name: str) -> None:
    document = REPO / name
    links = relative_links(document.read_text(encoding="utf-8"))
    assert links, f"{name} has no relative link"
    missing = [link for link in links if not (document.parent / link.split("#", 1)[0]).exists()]
    assert missing == [], f"{name} links to files that do not exist"


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    # mkdocs.yml sets strict and validation: a broken link or anchor, or a page missing from nav, is a warning,
    # and a warning fails the build
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(REPO / "mkdocs.yml"),
         "--site-dir", str(tmp_path / "site")],
        capture_output=True, text=True, cwd=tmp_path, env={**os.environ, **noxfile.DOCS_ENV}, timeout=120, check=False,
    )  # fmt: skip
    assert build.returncode == 0 and "WARNING" not in build.stderr, build.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    # profiles/README.md is a page of the site, included where it is
    assert "Bench scenarios" in (tmp_path / "site" / "workload" / "index.html").read_text(encoding="utf-8")


def test_the_readme_names_every_setting_and_session() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    configuration = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    sessions = (REPO / "docs" / "sessions.md").read_text(encoding="utf-8")
    variables = [s.env for s in SETTINGS]
    assert [v for v in variables if f"`{v}`" not in readme] == []
    assert [v for v in variables if f"| `{v}` |" not in configuration] == []
    names = [*PGO_SESSIONS, "bench", "tests", "lint", "docs"]
    assert [s for s in names if not re.search(rf"^\| `nox -s {re.escape(s)}[` ]", readme, re.MULTILINE)] == []
    assert [s for s in names if not re.search(rf"^\| `nox -s {re.escape(s)}[` ]", sessions, re.MULTILINE)] == []


def test_the_tests_install_what_the_docs_session_does() -> None:
    extra = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert set(noxfile.DOCS_REQUIREMENTS) <= set(extra["test"])
