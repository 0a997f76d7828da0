"""``mode = "command"`` instances and ``kind = "command"`` phases: run the binary, check its exit code."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from recipes.errors import TrainingFailed
from recipes.runner import say
from recipes.schema import Table, fill
from recipes.train.base import InstanceMode, Phase, PhaseContext, PhaseResult, register_mode, register_phase


@register_mode
class CommandMode(InstanceMode):
    """The binary is run by each phase, as many times as it says: for command-line tools."""

    kind = "command"

    def parse(self, table: Table) -> Any:
        return None

    def placeholders(self) -> set[str]:
        return set()

    def texts(self, options: Any) -> list[str]:
        return []

    def session(self, options: Any, ctx: PhaseContext) -> AbstractContextManager[PhaseContext]:
        @contextmanager
        def nothing_to_start() -> Iterator[PhaseContext]:
            yield ctx

        return nothing_to_start()


@register_phase
class CommandPhase(Phase):
    """Run ``<binary> <args…>`` ``runs`` times; each run must exit with ``expect_exit``."""

    kind = "command"
    modes = ("command",)

    def __init__(
        self, name: str, timeout: float | None, args: list[str], runs: int, expect_exit: int, stdin: str | None
    ) -> None:
        super().__init__(name, timeout)
        self.args = args
        self.runs = runs
        self.expect_exit = expect_exit
        self.stdin = stdin

    @classmethod
    def parse(cls, table: Table, name: str, timeout: float | None) -> Phase:
        return cls(
            name,
            timeout,
            args=table.strings("args"),
            runs=table.integer("runs", 1, minimum=1),
            expect_exit=table.integer("expect_exit", 0),
            stdin=table.string("stdin"),
        )

    def texts(self) -> list[str]:
        return [*self.args, *([self.stdin] if self.stdin else [])]

    def run(self, ctx: PhaseContext) -> PhaseResult:
        runs = ctx.scaled(self.runs)
        argv = [str(ctx.binary), *(fill(a, ctx.values) for a in self.args)]
        stdin = fill(self.stdin, ctx.values).encode() if self.stdin is not None else None
        limit = ctx.limit(self.timeout)
        start = time.monotonic()
        deadline = start + limit
        log = ctx.logs / f"train-{ctx.instance}-{self.name}.log"
        done = 0
        say(f"phase {ctx.instance}/{self.name}: {runs} runs of {' '.join(argv[1:]) or '(no arguments)'}")
        with log.open("ab") as out:
            for index in range(runs):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    proc = subprocess.run(
                        argv,
                        env=ctx.env,
                        input=stdin,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        timeout=remaining,
                        check=False,
                        stdin=None if stdin is not None else subprocess.DEVNULL,
                    )
                except subprocess.TimeoutExpired:
                    break
                if proc.returncode != self.expect_exit:
                    raise TrainingFailed(
                        f"phase {ctx.instance}/{self.name}: run {index + 1} of {runs} exited with "
                        f"{_describe(proc.returncode)}, expected {self.expect_exit}",
                        f"see {log}",
                    )
                done += 1
        seconds = time.monotonic() - start
        if done < runs:
            raise TrainingFailed(
                f"phase {ctx.instance}/{self.name}: only {done} of {runs} runs finished within {limit:.0f} s",
                "raise the phase's timeout (or PGO_PHASE_TIMEOUT), or lower its runs",
            )
        return PhaseResult(self.name, self.kind, runs, done, seconds, {"exit_ok": done})


def _describe(returncode: int) -> str:
    if returncode < 0:
        return f"signal {-returncode}"
    return f"exit code {returncode}"
