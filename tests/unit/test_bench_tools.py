"""The bench's tools that fail while it measures: one line each, not a traceback (a missing taskset for the load
generator, a callgrind_control that does not answer)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from recipes.bench import counting
from recipes.bench.load import run_load
from recipes.errors import BenchError


@pytest.mark.refuses("bench-load-without-taskset")
def test_a_missing_taskset_is_one_line_naming_its_package(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    with pytest.raises(BenchError) as caught:
        run_load(["h2load", "-n", "1", "http://127.0.0.1:1/"], core=0, env={"PATH": str(empty)},
                 log=tmp_path / "load.log", deadline=time.monotonic() + 5)  # fmt: skip
    assert caught.value.line() == (
        "taskset is not found: the bench pins its load generator to a core of its own with it "
        "(apt-get install util-linux (or put taskset on PATH))"
    )


@pytest.mark.refuses("callgrind-control-does-not-answer")
def test_a_callgrind_control_that_does_not_answer_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hangs = tmp_path / "callgrind_control"
    hangs.write_text("#!/bin/sh\nexec sleep 30\n")
    hangs.chmod(0o755)
    monkeypatch.setattr(counting, "CONTROL_TIMEOUT", 0.5)
    tools = counting.Tools(valgrind=Path("/usr/bin/valgrind"), callgrind_control=hangs, version="valgrind-3.19.0")
    server = cast(Any, SimpleNamespace(pid=4242, build=SimpleNamespace(label="pgo")))
    started = time.monotonic()
    with pytest.raises(BenchError) as caught:
        counting._control(tools, server, "--dump", env=dict(os.environ))
    assert time.monotonic() - started < 10
    assert caught.value.line().startswith("callgrind_control --dump 4242 (pgo) did not answer in 0 s (")
