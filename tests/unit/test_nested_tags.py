"""A tag of a tag (an annotated tag made of another tag's name: its object is that tag's object, not a commit) is
refused by ``nox -s release`` before anything is built, naming both tags (recipes/release/make.py:
check_release_checkout, recipes/release/reproducible/repo.py:tag_objects); a real repository in a temp folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from recipes.errors import EnvironmentRefused
from recipes.release.make import check_release_checkout
from recipes.release.reproducible import tag_objects
from tests.conftest import clean_env
from tests.unit.test_provenance import _git


def _repo(root: Path) -> tuple[Path, str]:
    repo = root / "repo"
    repo.mkdir()
    _git(root, "init", "-q", "-b", "main", str(repo))
    (repo / "a").write_text("a\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "a")
    _git(repo, "tag", "-a", "v1.0.0", "-m", "v1.0.0")
    _git(repo, "tag", "v0.9.0")  # lightweight, of the commit
    return repo, _git(repo, "rev-parse", "HEAD")


@pytest.mark.refuses("release-tag-of-a-tag")
def test_a_tag_of_a_tag_is_refused_naming_both(tmp_path: Path) -> None:
    repo, commit = _repo(tmp_path)
    env = clean_env()
    assert check_release_checkout(repo, "v1.0.0", env) == commit
    assert check_release_checkout(repo, "v0.9.0", env) == commit
    assert tag_objects(repo, "v1.0.0", env) == ["v1.0.0"] and tag_objects(repo, "v0.9.0", env) == []
    # git tag -a of a tag's name: git warns (a nested tag) and makes it; ^{commit} peels both to the commit
    _git(repo, "-c", "advice.nestedTag=false", "tag", "-a", "v1.0.1", "-m", "v1.0.1", "v1.0.0")
    assert _git(repo, "cat-file", "-t", "v1.0.1") == "tag"
    assert _git(repo, "rev-parse", "v1.0.1^{commit}") == commit
    assert tag_objects(repo, "v1.0.1", env) == ["v1.0.1", "v1.0.0"]
    with pytest.raises(EnvironmentRefused) as refused:
        check_release_checkout(repo, "v1.0.1", env)
    assert refused.value.line() == (
        "tag v1.0.1 is a tag of the tag v1.0.0 (its object is v1.0.0's tag object, not a commit): a release's tag "
        "names its commit (tag the commit itself: git tag -f -a v1.0.1 -m v1.0.1 v1.0.0^{commit})"
    )
    # a lightweight tag of v1.0.0's tag object: its ref names another tag's object
    _git(repo, "tag", "v1.0.2", "v1.0.0")
    with pytest.raises(EnvironmentRefused, match=r"^tag v1\.0\.2 is a tag of the tag v1\.0\.0 "):
        check_release_checkout(repo, "v1.0.2", env)
    # the hint, run, makes a tag the release takes
    _git(repo, "tag", "-f", "-a", "v1.0.1", "-m", "v1.0.1", "v1.0.0^{commit}")
    assert check_release_checkout(repo, "v1.0.1", env) == commit
