"""Where two binaries differ, explained by diffoscope: its text report beside the binaries, and a summary of
one screen (the sections that differ, then the report's first headings) for the session's output.

diffoscope is optional (Debian's ``diffoscope-minimal``): without it, the summary says which package to install.
Its time is bounded (``timeout`` around it, and diffoscope's own ``--timeout``) and so is its report's size.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from recipes.runner import run

PACKAGE = "diffoscope-minimal"
REPORT = "diffoscope.txt"
#: seconds diffoscope may take before it is stopped (a demo server's binary takes well under a minute)
TIMEOUT_SECONDS = 300
#: bytes of text report diffoscope may write; past this it writes "Max text output size reached." and stops, so
#: the headings after that point are missing (the hello fixture's plain and PGO binaries give 3.9 MB)
MAX_REPORT_BYTES = 16_000_000
_CUT = "Max text output size reached."

#: lines of the summary the session prints
SCREEN_LINES = 30
_WIDTH = 150

#: a heading of diffoscope's text output, ``├── name``, or a comment, ``│┄ comment``, at any depth (``│ ├── …``)
_HEADING = re.compile(r"^(?P<indent>(?:│ )*)(?:├── (?P<name>.+)|│┄ (?P<note>.+))$")
#: the ELF section a heading is about: ``--section=.text``, ``--hex-dump=.rodata``, ``--string-dump=.comment``
_SECTION = re.compile(r"--(?:section|hex-dump|string-dump)=(?P<section>\.?[\w.$@-]+)")


@dataclass(frozen=True)
class Summary:
    """diffoscope's text report, cut to what a person reads first."""

    headings: tuple[str, ...]  # every ``├──`` heading and ``│┄`` comment, indented by its depth
    sections: tuple[str, ...]  # the ELF sections named in headings, in report order
    lines: int  # lines of the whole report
    cut: bool  # diffoscope stopped at --max-text-report-size: later headings are missing

    def screen(self, report: Path | None = None, limit: int = SCREEN_LINES) -> list[str]:
        """At most ``limit`` lines: the differing sections, then the headings (what differs, where)."""
        where = f" ({report})" if report is not None else ""
        cut = ", cut at its size limit: later differences are missing" if self.cut else ""
        first = f"diffoscope: {len(self.headings)} headings in {self.lines} lines{where}{cut}"
        out = [first, f"  sections: {', '.join(self.sections) if self.sections else 'none named'}"]
        room = limit - len(out)
        shown = list(self.headings[:room])
        if len(self.headings) > room:
            shown[-1] = f"… {len(self.headings) - room + 1} more headings in the report"
        out += [f"  {_cut(h)}" for h in shown]
        return out


def _cut(line: str) -> str:
    return line if len(line) <= _WIDTH else line[: _WIDTH - 1] + "…"


def summarise(text: str) -> Summary:
    """The headings and the differing ELF sections of diffoscope's ``--text`` output."""
    headings: list[str] = []
    sections: list[str] = []
    lines = text.splitlines()
    for line in lines:
        match = _HEADING.match(line)
        if not match:
            continue
        depth = len(match.group("indent")) // 2
        name = (match.group("name") or "").removesuffix(" {}").strip()
        if not name:  # a comment is one level in from its "│": ``│ │┄`` belongs with ``│ │ ├──`` (the top's ``│┄``)
            name, depth = f"note: {match.group('note').strip()}", depth + 1 if depth else 0
        headings.append("  " * depth + name)
        for found in _SECTION.finditer(name):
            if found.group("section") not in sections:
                sections.append(found.group("section"))
    cut = any(line.strip() == _CUT for line in lines[-3:])
    return Summary(tuple(headings), tuple(sections), len(lines), cut)


@dataclass(frozen=True)
class Explanation:
    """What diffoscope said: its report's path (None when it did not run) and the lines to show."""

    report: Path | None
    lines: tuple[str, ...]


def find_diffoscope(env: Mapping[str, str]) -> str | None:
    return shutil.which("diffoscope", path=env.get("PATH", os.defpath))


def explain(
    first: Path, second: Path, dest: Path, env: Mapping[str, str], *, timeout: int = TIMEOUT_SECONDS
) -> Explanation:
    """Run diffoscope on two files, write its text report to ``dest/diffoscope.txt``; never raises for it."""
    tool = find_diffoscope(env)
    if tool is None:
        return Explanation(
            None, (f"diffoscope is not installed: apt-get install {PACKAGE} for a report of the difference",)
        )
    dest.mkdir(parents=True, exist_ok=True)
    report = dest / REPORT
    partial = dest / f".{REPORT}.{os.getpid()}.tmp"
    argv = [
        "timeout",
        "--kill-after=10",
        str(timeout),
        tool,
        "--text",
        str(partial),
        "--no-progress",
        "--max-text-report-size",
        str(MAX_REPORT_BYTES),
        "--timeout",
        str(max(timeout - 10, 1)),
        str(first),
        str(second),
    ]
    try:
        done = run(argv, env={**env, "LC_ALL": "C.UTF-8"}, log=dest / "logs" / "diffoscope.log", check=False)
        # diffoscope: 0 the same, 1 different; timeout(1): 124 out of time
        if done.returncode == 124:
            return Explanation(None, (f"diffoscope took more than {timeout} s and was stopped (see {done.log})",))
        if done.returncode == 0:  # no report is written for the same files
            return Explanation(None, ("diffoscope: finds no difference",))
        if done.returncode != 1 or not partial.is_file():
            return Explanation(None, (f"diffoscope failed with exit code {done.returncode} (see {done.log})",))
        os.replace(partial, report)
    finally:
        partial.unlink(missing_ok=True)
    text = report.read_text(encoding="utf-8", errors="replace")
    return Explanation(report, tuple(summarise(text).screen(report)))


def hint_words(explanation: Explanation, env: Mapping[str, str]) -> str:
    """A refusal's hint's first words: where diffoscope's report is, or which package would write one."""
    if explanation.report is not None:
        return f"diffoscope's report: {explanation.report}; "
    if find_diffoscope(env) is None:
        return f"install {PACKAGE} for diffoscope's report; "
    return ""
