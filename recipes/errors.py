"""The one exception family of the project.

Every known failure is a :class:`PgoError` whose message is one line saying what is wrong,
followed by a hint saying how to fix it. The noxfile turns it into ``session.error``; any other
exception keeps its traceback, because it is a bug.
"""

from __future__ import annotations


class PgoError(Exception):
    """A known failure: one line of what is wrong, and a hint of how to fix it."""

    def __init__(self, message: str, hint: str = "") -> None:
        self.message = " ".join(message.split())
        self.hint = " ".join(hint.split())
        super().__init__(self.line())

    def line(self) -> str:
        """The whole error as one line."""
        return f"{self.message} ({self.hint})" if self.hint else self.message


class ConfigError(PgoError):
    """Bad configuration: pyproject.toml, a workload file, PGO_* variables or posargs."""


class EnvironmentRefused(PgoError):
    """The build environment would silently change the build (RUSTFLAGS, profile flags in the base...)."""


class ToolchainError(PgoError):
    """rustc, cargo or llvm-profdata missing or of the wrong version."""


class MissingInput(PgoError):
    """A stage was run without what the previous stage leaves in the work dir."""


class CommandFailed(PgoError):
    """A cargo or tool run exited non-zero."""


class StoreError(PgoError):
    """The profile store is unsafe, or a store file is not what its name says."""


class TrainingFailed(PgoError):
    """A training phase did not complete, or got what it did not expect."""


class CheckFailed(PgoError):
    """A check of the built binary or its profile failed: the PGO binary is not what it claims."""


class WorkDirError(PgoError):
    """The work dir (PGO_OUT) cannot be written, or holds something unreadable."""


class BenchError(PgoError):
    """The benchmark could not run (no second core, a binary that does not start…)."""


class ProcStatError(PgoError):
    """A /proc stat line that is not one, or a process that is gone."""
