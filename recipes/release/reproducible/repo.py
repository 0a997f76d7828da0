"""Thin queries of git: the repository of a crate, a tag's commit and time, what is dirty; and the commands that
make a crate a tagged repository."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

from recipes.errors import CommandFailed, MissingInput
from recipes.runner import capture

_GIT_ENV = {"LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}


def git(repo: Path, *args: str, env: Mapping[str, str], strip: bool = True) -> str:
    text = capture(["git", "-C", str(repo), *args], env={**env, **_GIT_ENV})
    return text.strip() if strip else text


def repo_root(path: Path, env: Mapping[str, str]) -> Path:
    """The top of the git repository that holds ``path``."""
    directory = path if path.is_dir() else path.parent
    if not directory.is_dir():
        raise MissingInput(f"{directory} does not exist", "set PGO_MANIFEST to the crate's Cargo.toml")
    try:
        root = Path(git(directory, "rev-parse", "--show-toplevel", env=env))
    except CommandFailed as exc:
        raise MissingInput(
            f"{directory} is not in a git repository (releases and determinism builds are made from a commit)",
            f"make it one, with a tag: {make_repo_commands(directory)}",
        ) from exc
    try:
        git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", env=env)
    except CommandFailed as exc:
        raise MissingInput(
            f"the git repository {root} has no commit yet (releases and determinism builds are made from one)",
            f"commit it, with a tag: {make_repo_commands(root, init=False)}",
        ) from exc
    return root


def make_repo_commands(directory: Path, *, init: bool = True) -> str:
    """The shell commands that make ``directory`` a git repository with one commit tagged v0.1.0 (build output
    ignored: it must not be committed, nor make the worktree dirty)."""
    steps = [f"cd {shlex.quote(str(directory))}"]
    if init:
        steps.append("git init")
    steps += [
        r"printf '/target/\n/dist/\n' >> .gitignore",
        "git add -A",
        "git commit -m 'v0.1.0'",
        "git tag v0.1.0",
    ]
    return " && ".join(steps)


def tag_commit(repo: Path, tag: str, env: Mapping[str, str]) -> str:
    """The commit a tag names, or a :class:`MissingInput` saying it does not exist."""
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"refs/tags/{tag}^{{commit}}", env=env)
    except CommandFailed as exc:
        raise MissingInput(f"tag {tag} does not exist in {repo}", "see `git tag --list`; fetch the tags?") from exc


def tag_objects(repo: Path, tag: str, env: Mapping[str, str]) -> list[str]:
    """The names of the tag objects ``refs/tags/<tag>`` leads through to its commit (``git cat-file -t``, then each
    object's ``tag`` header): none for a lightweight tag, ``[tag]`` for an annotated tag of a commit; a tag of a tag
    gives both names, outermost first."""
    names: list[str] = []
    name = f"refs/tags/{tag}"
    while len(names) < MAX_TAG_DEPTH and git(repo, "cat-file", "-t", name, env=env) == "tag":
        header = git(repo, "cat-file", "tag", name, env=env).split("\n\n", 1)[0]
        fields = dict(line.partition(" ")[::2] for line in header.splitlines())
        names.append(fields.get("tag", "?"))
        name = fields.get("object", "")
    return names


#: how many tag objects :func:`tag_objects` follows (git itself stops peeling at a few)
MAX_TAG_DEPTH = 8


def commit_time(repo: Path, commit: str, env: Mapping[str, str]) -> int:
    return int(git(repo, "show", "-s", "--format=%ct", commit, env=env))


def dirty_paths(repo: Path, env: Mapping[str, str]) -> list[str]:
    """What ``git status`` lists (modified, staged, untracked but not ignored)."""
    text = git(repo, "status", "--porcelain=v1", "--untracked-files=all", env=env, strip=False)
    return [line[3:] for line in text.splitlines() if line.strip()]
