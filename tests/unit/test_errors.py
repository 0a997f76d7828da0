"""The one error family (recipes/errors.py) and the runner's reading of a FileNotFoundError."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from recipes import errors, runner
from recipes.errors import BenchError, CommandFailed, PgoError, ProcStatError, ToolchainError
from recipes.train.resources import Docroot, DocrootOptions


def test_every_error_class_is_a_pgo_error() -> None:
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__]
    assert BenchError in classes and ProcStatError in classes
    assert all(issubclass(c, PgoError) for c in classes)


def test_one_line_with_hint() -> None:
    error = BenchError("the benchmark\n  needs two cores", "run it on a machine with two")
    assert error.line() == "the benchmark needs two cores (run it on a machine with two)"
    assert str(error) == error.line()


@pytest.mark.refuses("command-working-directory-does-not-exist")
def test_run_in_a_missing_working_directory(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    with pytest.raises(CommandFailed) as caught:
        runner.run(["true"], env={"PATH": "/usr/bin:/bin"}, log=tmp_path / "logs" / "true.log", cwd=gone)
    assert caught.value.line() == (
        f"cannot run true: working directory {gone} does not exist (create it, or give an existing one)"
    )
    assert "command not found" not in caught.value.line()


@pytest.mark.refuses("command-working-directory-does-not-exist")
def test_capture_in_a_missing_working_directory(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    with pytest.raises(CommandFailed, match=f"working directory {gone} does not exist"):
        runner.capture(["true"], env={"PATH": "/usr/bin:/bin"}, cwd=gone)


@pytest.mark.refuses("captured-command-exits-non-zero")
def test_a_captured_command_that_fails_names_its_exit_code_and_last_line(tmp_path: Path) -> None:
    with pytest.raises(CommandFailed, match=rf"ls {tmp_path}/nowhere failed with exit code 2: ls: cannot access"):
        runner.capture(["ls", str(tmp_path / "nowhere")], env={"PATH": "/usr/bin:/bin"})


@pytest.mark.refuses("command-not-installed")
def test_a_missing_command_is_still_command_not_found(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match="no-such-tool-here: command not found"):
        runner.capture(["no-such-tool-here"], env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    with pytest.raises(ToolchainError, match="no-such-tool-here: command not found"):
        runner.run(["no-such-tool-here"], env={"PATH": "/usr/bin:/bin"}, log=tmp_path / "x.log")


def test_docroot_options_of_another_kind_are_a_bug() -> None:
    """Not an assert (``python -O`` drops those): a TypeError, which keeps its traceback."""
    docroot = Docroot()
    assert "{bodies}/attack.txt" in docroot.files(DocrootOptions())
    with pytest.raises(TypeError, match="DocrootOptions its parse returned, got str"):
        docroot.files("site")
