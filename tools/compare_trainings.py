"""Two trainings of one workload on two targets (x86_64 natively, aarch64 under qemu-user), side by side.

    python tools/compare_trainings.py WORK_A WORK_B --crate demo_server

WORK_A and WORK_B are the work dirs (``PGO_OUT``) of ``nox -s instrument train merge`` of the same crate and
workload for two ``PGO_TARGET``s. Prints, as a Markdown table: each training's wall time and requests or runs,
the functions each executed (llvm-profdata's count, all crates), the crate's own executed functions compared as
demangled paths (symbol hashes differ between targets, so llvm-profdata's overlap, which matches functions by
symbol, finds none in common), and every crate's executed functions compared the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from recipes.bench import coverage
from recipes.errors import PgoError
from recipes.runner import run
from recipes.toolchain.rustc import find_profdata, rustc_info, rustc_sysroot


def _report(work: Path) -> dict[str, Any]:
    data = json.loads((work / "report.json").read_text(encoding="utf-8"))
    for stage in ("instrument", "train", "merge"):
        if stage not in data or "failed" in data[stage]:
            raise SystemExit(f"{work}: no successful {stage} in report.json: run nox -s instrument train merge")
    return dict(data)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--crate", required=True, help="the crate's name as in its paths (demo_server, rg)")
    args = parser.parse_args(argv)
    env = dict(os.environ)
    tool = find_profdata(rustc_info(env), rustc_sysroot(env), env, None)
    cxxfilt = coverage.demangler(tool)
    rows: list[dict[str, Any]] = []
    crate_sets: list[set[str]] = []
    all_sets: list[set[str]] = []
    for work in (args.first, args.second):
        report = _report(work)
        profile = Path(report["merge"]["profile"])
        log = work / "logs" / "compare-counts.log"
        counts = coverage.parse_counts(
            run([str(tool.path), "show", "--all-functions", "--counts", str(profile)], env=env, log=log).output()
        )
        executed = [name for name, count in counts.items() if count > 0]
        paths = coverage.demangle(executed, cxxfilt, env)
        crate_sets.append(coverage.crate_paths(paths, args.crate))
        all_sets.append(set(paths))
        rows.append(
            {
                "target": report["instrument"]["target"],
                "train_seconds": report["train"]["seconds"],
                "requests": report["train"]["requests"],
                "executed": report["merge"]["executed_functions"],
                "total": report["merge"]["total_functions"],
                "crate_executed": len(crate_sets[-1]),
                "profile": profile,
            }
        )
    compared = coverage.executed_overlap(sorted(crate_sets[0]), sorted(crate_sets[1]))
    every = coverage.executed_overlap(sorted(all_sets[0]), sorted(all_sets[1]))
    print("| | " + " | ".join(row["target"] for row in rows) + " |")
    print("| --- | --- | --- |")
    print("| training wall time | " + " | ".join(f"{row['train_seconds']:.1f} s" for row in rows) + " |")
    print("| requests or runs | " + " | ".join(f"{row['requests']:,}" for row in rows) + " |")
    print(
        "| functions executed (all crates) | "
        + " | ".join(f"{row['executed']:,} of {row['total']:,}" for row in rows)
        + " |"
    )
    print(f"| {args.crate}'s own functions executed | " + " | ".join(str(row["crate_executed"]) for row in rows) + " |")
    print(
        f"\n{args.crate}: {compared['both']} executed by both, {compared['only_first']} by {rows[0]['target']} only, "
        f"{compared['only_second']} by {rows[1]['target']} only ({compared['share']:.1%} of the union)"
    )
    print(
        f"every crate, as paths: {every['both']:,} executed by both, {every['only_first']:,} by {rows[0]['target']} "
        f"only, {every['only_second']:,} by {rows[1]['target']} only ({every['share']:.1%} of the union)"
    )
    only = sorted(crate_sets[0] ^ crate_sets[1])
    if only:
        print("\nexecuted by one only:")
        for name in only:
            side = rows[0]["target"] if name in crate_sets[0] else rows[1]["target"]
            print(f"  {side}: {name}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except PgoError as error:
        sys.exit(f"compare_trainings: {error.line()}")
