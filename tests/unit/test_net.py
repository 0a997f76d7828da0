"""Pure parts of the training's plumbing: /proc task stat lines, deterministic files, workload refusals."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from recipes import docroot, net

# real lines of /proc/<pid>/task/<tid>/stat (the second: a process whose name holds spaces and parentheses)
TASK_STAT = [
    ("28913 (python3) S 28870 28870 6538 0 -1 4194368 4 6555 0 0 0", ("python3", "S")),
    ("13669 (srv (x) 1) R 13665 13665 7335 0 -1 4194304 3130 6560 7 0 3 2 3 1 20 0 3 0", ("srv (x) 1", "R")),
    ("7 (tokio-runtime-w) D 1 1 1 0 -1 4194368 0 0 0 0 0 0 0 0 20 0 5 0", ("tokio-runtime-w", "D")),
]


@pytest.mark.parametrize(("line", "parsed"), TASK_STAT)
def test_parse_task_stat(line: str, parsed: tuple[str, str]) -> None:
    assert net.parse_task_stat(line) == parsed


def test_free_ports_are_distinct() -> None:
    ports = net.free_ports(5)
    assert len(set(ports)) == 5
    assert all(1024 <= p <= 65535 for p in ports)


def test_thread_states_of_this_process_and_of_none() -> None:
    own_name = Path(f"/proc/{os.getpid()}/comm").read_text().strip()  # python3, or pytest when run as a script
    states = net.thread_states(os.getpid())
    assert f" R {own_name}" in states  # this thread is running while it reads its own state
    assert "is gone" in net.thread_states(2**22 + 12345)


def test_docroot_is_deterministic(tmp_path: Path) -> None:
    first = docroot.make_docroot(tmp_path / "a")
    second = docroot.make_docroot(tmp_path / "b")
    for name, size in docroot.DOCROOT_FILES.items():
        one, two = Path(first["docroot"]) / name, Path(second["docroot"]) / name
        assert one.stat().st_size == size
        assert one.read_bytes() == two.read_bytes()
    attack = (Path(first["bodies"]) / "attack.txt").read_text()
    assert "<script>" in attack
    assert "union select" in attack
    digest = hashlib.sha256((Path(first["docroot"]) / "index.html").read_bytes()).hexdigest()
    assert digest == hashlib.sha256(docroot.content("index.html", 5 * 1024)).hexdigest()
