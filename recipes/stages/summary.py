"""The short summary of report.json printed at the end of a session: one line or a few per stage."""

from __future__ import annotations

from recipes import report
from recipes.cflags import ASSEMBLED
from recipes.results import BoltResult, CCodeRecord, Report, WorkloadRun


def counted(run: WorkloadRun) -> str:
    """A workload run's count in its own words: ``12 runs``, ``300 requests``, ``300 requests and 12 runs``
    (a command phase runs, an HTTP or handshakes phase sends requests)."""
    phases = run.get("phases") or []
    runs = sum(p.get("requests", 0) for p in phases if p.get("kind") == "command")
    requests = sum(p.get("requests", 0) for p in phases if p.get("kind") != "command")
    if not phases:
        return f"{run.get('requests', 0):,} requests or runs"
    parts = [f"{n:,} {word}" + ("" if n == 1 else "s") for n, word in ((requests, "request"), (runs, "run")) if n]
    return " and ".join(parts) or "nothing"


def summary_lines(full: Report) -> list[str]:
    """The short summary printed at the end of a session."""
    lines = []
    for stage in report.STAGES:
        # a test record's ``failed`` is its count of failed tests, shown with the counts; a reason is a failure
        if stage in full and (reason := report.failed(full[stage])) and not isinstance(full[stage]["failed"], int):
            lines.append(f"{stage:<11} failed: {reason}")
            full = full.copy()
            full.pop(stage)
    if "instrument" in full:
        lines.append(f"instrument  {full['instrument']['seconds']:8.1f} s  {full['instrument']['binary']}")
    if "train" in full:
        t = full["train"]
        lines.append(
            f"train       {t['seconds']:8.1f} s  {counted(t)} in {len(t['phases'])} phases, "
            f"{t.get('profraw_files', 0)} .profraw files"
        )
    if "merge" in full:
        m = full["merge"]
        lines.append(
            f"merge       {m['seconds']:8.1f} s  {m['executed_functions']} of {m['total_functions']} "
            f"functions executed (non-zero counts; floor {m['min_functions']}), {m['profraw_merged']} raw profiles "
            "merged" + (f", {len(m['profraw_dropped'])} dropped" if m.get("profraw_dropped") else "")
        )
    if "optimise" in full:
        o = full["optimise"]
        lines.append(
            f"optimise    {o.get('seconds', 0):8.1f} s  {o['missing_profile_functions']} functions without "
            f"profile, {o['stale_profile_warnings']} stale; " + (o.get("libc") or f"glibc {o['max_glibc'] or 'none'}")
        )
        lines.append(
            f"coverage    {o['main_crate_functions_with_profile']} functions of the main crate with a profile record "
            f"(executed or not), {o['main_crate_functions_without_profile']} without (rustc warned: no profile data)"
        )
        c_code = o.get("c_code")
        for crate in c_code["crates"] if c_code else []:
            with_profile, without = crate.get("functions_with_profile", []), crate.get("functions_without_profile", [])
            lines.append(
                f"c code      {crate['crate']}: {len(with_profile)} C/C++ functions with profile data, {len(without)} "
                f"without ({', '.join(_compiler_words(crate['compilers']))})"
                + ("" if crate["profile_flags"] or not c_code else f"; {_why_unprofiled(c_code)}")
            )
        lines.append(f"binary      {o['binary']}")
        lines.append(f"            sha256 {o['binary_sha256']}")
        lines.append(f"profile     {o['store_path']}")
        if "verify" in o:
            lines.append(
                f"verify      {o['verify']['seconds']:8.1f} s  the optimised binary ran the workload "
                f"({counted(o['verify'])})"
            )
        if o.get("target_cpu"):
            lines.append(f"warning     the flags set target-cpu={o['target_cpu']}: not a baseline release build")
    if "test" in full:
        tested = full["test"]
        counts = f"{tested['passed']} passed, {tested['failed']} failed, {tested['ignored']} ignored"
        lines.append(f"test        {tested['seconds']:8.1f} s  {counts} (the suite built with the profile)")
    if "bolt" in full:
        lines += bolt_summary_lines(full["bolt"])
    return lines


def bolt_summary_lines(b: BoltResult) -> list[str]:
    before, after = b["dyno_stats"]["before"], b["dyno_stats"]["after"]
    lines = [
        f"bolt        {b['seconds']:8.1f} s  profile of {b['functions_with_profile']} of {b['total_functions']} "
        f"functions ({b['profile_main_crate_functions']} of the main crate), {b['profile_branches']} branches; "
        f"{b['input_bytes']} -> {b['binary_bytes']} bytes",
    ]
    skipped = b.get("instrumentation_skipped_functions", 0)
    if skipped:
        lines.append(
            f"            {skipped} functions left out of BOLT's instrumentation, without BOLT profile: names up to "
            f"{b.get('longest_function_name', 0)} characters overflow its runtime's line (LLVM issue 169899)"
        )
    for name in ("executed instructions", "taken branches"):
        if name in before and name in after and before[name]:
            change = 100.0 * (after[name] - before[name]) / before[name]
            lines.append(f"            {name}: {before[name]} -> {after[name]} ({change:+.1f} %) (dyno-stats)")
    lines.append(f"binary      {b['binary']}")
    lines.append(f"            sha256 {b['binary_sha256']}")
    lines.append(f"profile     {b['store_path']}")
    if "verify" in b:
        lines.append(f"verify      {b['verify']['seconds']:8.1f} s  the BOLTed binary ran the workload")
    return lines


def _why_unprofiled(c_code: CCodeRecord) -> str:
    """Why a crate's C has no profile: the plan left the C alone (``PGO_C=0``, a cross target: its reason), or the
    profile flags did not reach a compiler the plan profiles."""
    languages = list(c_code["languages"].values())
    if any(lang["profiled"] for lang in languages):
        return "the profile flags did not reach it"
    off = next((lang["off"] for lang in languages if lang["off"]), None)
    return f"not profiled: {off}" if off else "the profile flags did not reach it"


def _compiler_words(compilers: list[str]) -> list[str]:
    """The compilers of a crate's C, an assembled object's ("unknown" in report.json) said as what it is."""
    return ["assembly, not judged" if c == ASSEMBLED else c for c in compilers]
