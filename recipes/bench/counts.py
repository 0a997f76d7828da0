"""Counts: what valgrind's simulation says a build does, instead of how long it took (``--measure counts``).

valgrind runs the binary on a simulated CPU and counts what it executes: instructions (``Ir``), reads and
writes, the misses of a simulated cache hierarchy (first-level instruction and data caches, one last level) and
the mispredictions of a simulated branch predictor (conditional ``Bcm`` and indirect ``Bim``). The counts do
not depend on the machine's load, so two runs of the same build give the same figures where CPU time drifts by
several per cent; they say what a profile changed (fewer instructions, fewer I1 misses, fewer mispredictions)
but not the time itself. :func:`estimate` weighs them into cycles.

Here the pure parts: the flags (the simulated caches are given, not taken from the host's ``cpuid``, so that
another machine gives the same figures), the parser of cachegrind's and callgrind's output files (the
``events:`` header and the ``summary:`` totals, never what valgrind prints), the estimate, and the refusals
(valgrind missing, an instruction valgrind does not know). :mod:`recipes.bench.counting` runs the trials,
:mod:`recipes.bench.counts_report` writes the table.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from recipes.errors import BenchError, ToolchainError
from recipes.inputs import read_text
from recipes.runner import query

PACKAGE = "valgrind"  # the Debian package of valgrind, cachegrind, callgrind and callgrind_control

#: the simulated caches, fixed: by default valgrind sizes them from the host (this machine's L3 is 320 MB), so
#: the same binary would count other misses on another runner. 32 KiB 8-way first-level caches and an 8 MiB
#: 16-way last level, 64-byte lines: a current x86 core's L1s and a typical share of its L3.
CACHES = ("--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64")
SIMULATION = ("--cache-sim=yes", "--branch-sim=yes", *CACHES)
CACHEGRIND = ("--tool=cachegrind", *SIMULATION)
CALLGRIND = ("--tool=callgrind", *SIMULATION)

#: the events of a run with the cache and branch simulation, as both tools name them
EVENTS = ("Ir", "I1mr", "ILmr", "Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw", "Bc", "Bcm", "Bi", "Bim")

# ---------------------------------------------------------------------------------------------- the estimate

#: Cycles per event in :func:`estimate`.
#:
#: - an instruction: 0.5 cycle. A current x86 core (Golden Cove, Zen 4) retires 4 to 6 instructions a cycle
#:   at best and about 2 on branchy integer code when nothing stalls it; loads and stores that hit the L1 are
#:   part of that issue width, so they get no weight of their own (iai-callgrind's "L1 hits" counts each data
#:   access as a cycle besides its instruction: about 1.4 cycles per instruction, an IPC of 0.7).
#: - a first-level miss that hits the last level: 10 cycles (an L2 hit is about 14 cycles, partly hidden by
#:   out-of-order execution for data; an I1 miss stalls the front end outright).
#: - a last-level miss: 35 cycles (iai-callgrind's RAM weight). DRAM is ~300 cycles away, but cachegrind
#:   simulates no prefetcher, so every sequential stream counts as misses a real core mostly hides, and an
#:   out-of-order core overlaps the rest.
#: - a branch misprediction (conditional or indirect): 17 cycles, the pipeline refilled (15 to 20 cycles on
#:   current x86 cores). iai-callgrind's estimate leaves them out; on jaq that ranks the builds wrongly: a
#:   profile whose indirect-call promotion adds 2 to 3.5 % instructions and removes a third of the indirect
#:   mispredictions was faster by CPU time on four of five scenarios, and is so by this estimate.
WEIGHTS = {"instruction": 0.5, "l1_miss": 10.0, "ll_miss": 35.0, "mispredict": 17.0}
FORMULA = (
    "0.5 x instructions + 10 x first-level misses that hit the last level + 35 x last-level misses "
    "+ 17 x branch mispredictions (conditional and indirect)"
)

#: a trial that counts fewer instructions has no figure: what the environment moves (its size, the paths the
#: loader searches) is a few thousand instructions, 0.1 % of this
MIN_INSTRUCTIONS = 1_000_000


@dataclass(frozen=True)
class Counts:
    """The totals of one or more runs (or one server trial): valgrind's events by name."""

    events: Mapping[str, int]

    def __getitem__(self, name: str) -> int:
        return int(self.events.get(name, 0))

    def __add__(self, other: Counts) -> Counts:
        return Counts({e: self[e] + other[e] for e in EVENTS})

    @property
    def instructions(self) -> int:
        return self["Ir"]

    @property
    def l1_misses(self) -> int:
        return self["I1mr"] + self["D1mr"] + self["D1mw"]

    @property
    def ll_misses(self) -> int:
        """Last-level misses, instruction and data."""
        return self["ILmr"] + self["DLmr"] + self["DLmw"]

    @property
    def mispredicts(self) -> int:
        return self["Bcm"] + self["Bim"]

    def figures(self) -> dict[str, float]:
        """What the table shows: instructions, I1 misses, LL misses (instruction and data), the conditional and
        indirect mispredictions, and the estimate of cycles."""
        return {
            "instructions": float(self.instructions),
            "i1_misses": float(self["I1mr"]),
            "ll_misses": float(self.ll_misses),
            "ll_i_misses": float(self["ILmr"]),
            "ll_d_misses": float(self["DLmr"] + self["DLmw"]),
            "cond_mispredicts": float(self["Bcm"]),
            "ind_mispredicts": float(self["Bim"]),
            "estimate": estimate(self),
        }


def estimate(counts: Counts) -> float:
    """Cycles, estimated from the counts with :data:`WEIGHTS` (:data:`FORMULA`)."""
    l1_only = max(0, counts.l1_misses - counts.ll_misses)
    return (
        WEIGHTS["instruction"] * counts.instructions
        + WEIGHTS["l1_miss"] * l1_only
        + WEIGHTS["ll_miss"] * counts.ll_misses
        + WEIGHTS["mispredict"] * counts.mispredicts
    )


# ---------------------------------------------------------------------------------------------- the files


def parse_totals(text: str, source: str = "the output file") -> Counts:
    """A cachegrind or callgrind output file's totals: the ``summary:`` line (callgrind: else ``totals:``) read
    by the ``events:`` header. A file without them (a run killed before valgrind wrote it) is refused."""
    lines: dict[str, list[str]] = {}  # the last events:, summary: and totals: line
    for line in text.splitlines():
        key, colon, rest = line.partition(":")
        if colon and key in {"events", "summary", "totals"}:
            lines[key] = rest.split()
    events = lines.get("events")
    values = lines.get("summary", lines.get("totals"))
    if events is None or values is None:
        raise BenchError(
            f"{source} has no {'events' if events is None else 'summary'} line",
            "valgrind did not finish writing it: see the valgrind log beside it",
        )
    missing = [e for e in EVENTS if e not in events]
    if missing:
        raise BenchError(
            f"{source} counts no {', '.join(missing)}", "it must come from a run with --cache-sim=yes --branch-sim=yes"
        )
    try:
        numbers = [int(v) for v in values]
    except ValueError as exc:
        raise BenchError(f"{source}: a summary that is not numbers: {' '.join(values)[:80]}") from exc
    # callgrind writes a short summary when the last events are zero
    numbers += [0] * (len(events) - len(numbers))
    return Counts(dict(zip(events, numbers, strict=False)))


_NAMED = re.compile(r"^(c?ob)=\((\d+)\)(?: (.*))?$")


def parse_objects(text: str, source: str = "the dump") -> dict[str, Counts]:
    """A callgrind dump's self cost per object (the binary, libc.so.6, ld.so …), by the object's path: the cost
    lines under each ``ob=``, without the inclusive cost line that follows each ``calls=``. Their sum is the
    dump's ``totals:``."""
    events: list[str] | None = None
    names: dict[str, str] = {}
    current = "???"
    after_call = False
    totals: dict[str, list[int]] = {}
    for line in text.splitlines():
        if line.startswith("events:"):
            events = line.split(":", 1)[1].split()
            continue
        named = _NAMED.match(line)
        if named:
            kind, number, name = named.groups()
            if name:
                names[number] = name
            if kind == "ob":
                current = names.get(number, "???")
            continue
        if line.startswith("calls="):
            after_call = True
            continue
        if events is None or not line or not (line[0].isdigit() or line[0] in "+-*"):
            continue
        if after_call:  # the call's inclusive cost: the callee's own lines count it
            after_call = False
            continue
        row = totals.setdefault(current, [0] * len(events))
        for i, value in enumerate(line.split()[1 : len(events) + 1]):
            row[i] += int(value)
    if events is None:
        raise BenchError(f"{source} has no events line", "valgrind did not finish writing it: see the valgrind log")
    return {name: Counts(dict(zip(events, row, strict=True))) for name, row in totals.items()}


def own_object(objects: Mapping[str, Counts], binary: Path) -> Counts | None:
    """The binary's own entry among a dump's objects (by its path), or None."""
    wanted = binary.resolve()
    return next((c for name, c in objects.items() if name != "???" and Path(name).resolve() == wanted), None)


def read_totals(path: Path) -> Counts:
    text = read_text(path, "valgrind's output file", BenchError, "see the valgrind log beside it")
    return parse_totals(text, str(path))


def dump_trigger(text: str) -> str:
    """A callgrind dump's ``desc: Trigger:`` (``dump trial-3``), or ``""``."""
    match = re.search(r"^desc: Trigger: (.*)$", text, re.MULTILINE)
    return match.group(1).strip() if match else ""


# ---------------------------------------------------------------------------------------------- refusals

_UNHANDLED = re.compile(r"unhandled instruction bytes: ((?:0x[0-9A-Fa-f]+ ?)+)")
_UNRECOGNISED = re.compile(r"Unrecognised instruction at address (0x[0-9a-fA-F]+)")


def unknown_instruction(log: str) -> str:
    """What valgrind's log says about an instruction it cannot run, or ``""``: the bytes and the address."""
    address = _UNRECOGNISED.search(log)
    if address is None:
        return ""
    found = _UNHANDLED.search(log)
    what = f"bytes {found.group(1).strip()}" if found else "an instruction"
    return f"{what} at {address.group(1)}"


def refuse_unknown_instruction(label: str, binary: Path, log: str, log_path: Path, version: str) -> None:
    """Refuse a binary that uses an instruction valgrind does not know (AVX-512 of a ``target-cpu`` build on
    valgrind 3.19): valgrind raises SIGILL in it, and nothing it counted would be the build's."""
    where = unknown_instruction(log)
    if where:
        raise BenchError(
            f"{label}: {version} cannot run {binary}: it does not know an instruction the binary uses ({where}; "
            "AVX-512 of a target-cpu build, for one)",
            f"measure it with --measure cpu, or count a build without target-cpu or target-feature; see {log_path}",
        )


def find_tool(name: str, environ: Mapping[str, str]) -> Path:
    """``valgrind`` (or ``callgrind_control``) on the PATH, or one line naming the package."""
    found = shutil.which(name, path=environ.get("PATH"))
    if found is None:
        raise ToolchainError(
            f"--measure counts runs the builds under valgrind and {name} is not on the PATH",
            f"install the Debian package {PACKAGE} (apt-get install {PACKAGE})",
        )
    return Path(found)


def version(valgrind: Path, environ: Mapping[str, str]) -> str:
    """``valgrind-3.19.0``, from ``valgrind --version`` run with ``environ``."""
    done = query([str(valgrind), "--version"], env=environ)
    text = done.stdout.strip()
    if done.returncode != 0 or not text.startswith("valgrind"):
        raise ToolchainError(f"{valgrind} --version said {text[:80]!r}", f"install the Debian package {PACKAGE}")
    return text


#: what the counts cannot show, said in the table and in docs/worth.md ("Counts")
LIMITATIONS = (
    "the kernel's time: system calls, page faults and the network stack are not simulated (CPU time shows them)",
    "threads serialised: valgrind runs one thread at a time, so a multi-threaded build runs otherwise than on the "
    "machine (locks never contended, no work stolen): give a scenario one worker thread",
    "a model, not the machine: one simple branch predictor, caches without a prefetcher, no micro-op cache, no "
    "cost of taken branches; the estimate weighs the counts by typical costs",
    "instructions valgrind does not know are refused (AVX-512 on valgrind 3.19: a target-cpu build)",
)
