"""recipes/release/diff.py: the summary of diffoscope's text report, on real captures in tests/data/diffoscope/
(two small gcc-built programs, the same two in tarballs, the hello fixture's rebuild mismatch cut by
--max-text-report-size), and diffoscope run on two binaries, missing, out of time and failing."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from recipes.release import diff
from recipes.release.rebuild import explain as rebuild_explain
from tests.conftest import DATA

CAPTURES = DATA / "diffoscope"
needs_diffoscope = pytest.mark.skipif(
    shutil.which("diffoscope") is None, reason="diffoscope is not installed (apt-get install diffoscope-minimal)"
)


def test_summary_of_two_builds_names_the_sections_that_differ() -> None:
    summary = diff.summarise((CAPTURES / "c-two-builds.txt").read_text())
    assert summary.sections == (".text", ".rodata")
    assert summary.headings == (
        "note: File has been modified after NT_GNU_BUILD_ID has been applied.",
        "readelf --wide --notes",
        "objdump --line-numbers --disassemble --demangle --reloc --no-show-raw-insn --section=.text",
        "readelf --wide --decompress --hex-dump=.rodata",
    )
    assert (summary.lines, summary.cut) == (41, False)
    screen = summary.screen(Path("w/diffoscope.txt"))
    assert screen[:2] == ["diffoscope: 4 headings in 41 lines (w/diffoscope.txt)", "  sections: .text, .rodata"]
    assert len(screen) == 6 and screen[-1] == "  readelf --wide --decompress --hex-dump=.rodata"


def test_summary_of_tarballs_indents_what_is_inside() -> None:
    summary = diff.summarise((CAPTURES / "c-two-tarballs.txt").read_text())
    assert summary.headings[:4] == (
        "prog.tar",
        "  file list",
        "  +++ second/prog",
        "    note: File has been modified after NT_GNU_BUILD_ID has been applied.",
    )
    assert "    readelf --wide --decompress --hex-dump=.rodata" in summary.headings
    assert summary.sections == (".text", ".rodata")


def test_summary_of_a_report_cut_at_its_size_limit_says_so() -> None:
    """diffoscope stops at --max-text-report-size: the headings after that point are not in the report."""
    summary = diff.summarise((CAPTURES / "hello-rebuild-cut.txt").read_text())
    assert summary.cut and summary.sections == ()
    assert summary.headings == (
        "note: File has been modified after NT_GNU_BUILD_ID has been applied.",
        "readelf --wide --file-header",
    )
    first, sections = summary.screen()[:2]
    assert first == "diffoscope: 2 headings in 25 lines, cut at its size limit: later differences are missing"
    assert sections == "  sections: none named"


def test_summary_fits_one_screen() -> None:
    text = "--- a\n+++ b\n" + "".join(
        f"├── readelf --wide --decompress --hex-dump=.s{i} {{}}\n│ @@ -1 +1 @@\n" for i in range(40)
    )
    screen = diff.summarise(text).screen()
    assert len(screen) == diff.SCREEN_LINES == 30
    assert screen[1].startswith("  sections: .s0, .s1,") and screen[1].endswith(".s39")
    assert screen[-2] == "  readelf --wide --decompress --hex-dump=.s26"
    assert screen[-1] == "  … 13 more headings in the report"
    long = diff.summarise("├── " + "x" * 400 + "\n").screen()
    assert len(long[-1]) == 2 + 150 and long[-1].endswith("…")


def _two_programs(tmp_path: Path) -> tuple[Path, Path]:
    paths = []
    for name, factor in (("first", 3), ("second", 5)):
        source = tmp_path / f"{name}.c"
        source.write_text(f'#include <stdio.h>\nint main(void) {{ printf("{name} %d\\n", {factor} * 7); return 0; }}\n')
        binary = tmp_path / name
        subprocess.run(["gcc", "-O1", "-o", str(binary), str(source)], check=True)
        paths.append(binary)
    return paths[0], paths[1]


@needs_diffoscope
def test_explain_writes_the_report_and_a_screen(tmp_path: Path) -> None:
    first, second = _two_programs(tmp_path)
    explained = diff.explain(first, second, tmp_path / "out", dict(os.environ))
    assert explained.report == tmp_path / "out" / "diffoscope.txt"
    text = explained.report.read_text()
    assert text.startswith(f"--- {first}\n+++ {second}\n") and "--section=.text" in text
    assert explained.lines[0].startswith("diffoscope: ") and explained.lines[0].endswith(f"({explained.report})")
    assert ".rodata" in explained.lines[1] and ".text" in explained.lines[1]
    assert not list((tmp_path / "out").glob(".diffoscope.txt.*")), "no temporary file left"
    same = diff.explain(first, first, tmp_path / "same", dict(os.environ))
    assert same.lines == ("diffoscope: finds no difference",)


def test_explain_without_diffoscope_names_the_package(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty)}
    explained = diff.explain(Path("/bin/true"), Path("/bin/false"), tmp_path / "out", env)
    assert explained.report is None
    assert explained.lines == (
        "diffoscope is not installed: apt-get install diffoscope-minimal for a report of the difference",
    )
    hint, record = rebuild_explain(Path("/bin/true"), Path("/bin/false"), tmp_path / "out", env)
    assert hint.startswith("install diffoscope-minimal for diffoscope's report")
    assert record == {"report": None, "summary": list(explained.lines)}
    assert not (tmp_path / "out").exists()


def _fake_diffoscope(tmp_path: Path, body: str) -> dict[str, str]:
    """A diffoscope that hangs or fails, first on PATH (the real one cannot be made to on demand)."""
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "diffoscope").write_text(f"#!/bin/sh\n{body}\n")
    (fake / "diffoscope").chmod(0o755)
    return {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}


def test_explain_stops_diffoscope_at_its_time_limit(tmp_path: Path) -> None:
    env = _fake_diffoscope(tmp_path, "exec sleep 60")
    started = time.monotonic()
    explained = diff.explain(Path("/bin/true"), Path("/bin/false"), tmp_path / "out", env, timeout=1)
    assert time.monotonic() - started < 15
    assert explained.report is None
    assert explained.lines[0].startswith("diffoscope took more than 1 s and was stopped (see ")
    assert not (tmp_path / "out" / "diffoscope.txt").exists()


def test_explain_reports_a_failing_diffoscope(tmp_path: Path) -> None:
    env = _fake_diffoscope(tmp_path, "echo 'diffoscope: something broke' >&2; exit 2")
    explained = diff.explain(Path("/bin/true"), Path("/bin/false"), tmp_path / "out", env)
    assert explained.report is None
    log = tmp_path / "out" / "logs" / "diffoscope.log"
    assert explained.lines == (f"diffoscope failed with exit code 2 (see {log})",)
    assert "something broke" in log.read_text()
