"""The short summary of report.json printed at the end of a session: one line or a few per stage."""

from __future__ import annotations

from recipes import report
from recipes.results import (
    BoltResult,
    CCodeRecord,
    CCrateRecord,
    Failed,
    InstrumentResult,
    MergeResult,
    OptimiseResult,
    Report,
    ShardRecord,
    TestResult,
    TrainResult,
    UnexecutedRecord,
    WorkloadRun,
)
from recipes.runner import plural
from recipes.toolchain.cflags import ASSEMBLED


def counted(run: WorkloadRun) -> str:
    """A workload run's count in its own words: ``12 runs``, ``300 requests``, ``300 requests and 12 runs``
    (a command phase runs, an HTTP or handshakes phase sends requests)."""
    runs = sum(p["requests"] for p in run.phases if p["kind"] == "command")
    requests = sum(p["requests"] for p in run.phases if p["kind"] != "command")
    if not run.phases:
        return f"{run.requests:,} requests or runs"
    parts = [f"{n:,} {word}" + ("" if n == 1 else "s") for n, word in ((requests, "request"), (runs, "run")) if n]
    return " and ".join(parts) or "nothing"


def summary_lines(full: Report) -> list[str]:
    """The short summary printed at the end of a session."""
    # a test record whose suite ran and failed is a TestResult (its counts are shown); a reason is a Failed
    lines = [f"{stage:<11} failed: {f.reason}" for stage in report.STAGES if isinstance(f := full.stage(stage), Failed)]
    if isinstance(i := full.instrument, InstrumentResult):
        lines.append(f"instrument  {i.seconds:8.1f} s  {i.binary}")
        lines += c_code_lines(i.c_code, profiled=True)
    if isinstance(t := full.train, TrainResult):
        lines.append(
            f"train       {t.seconds:8.1f} s  {counted(t)} in {plural(len(t.phases), 'phase')}, "
            f"{plural(t.profraw_files or 0, '.profraw file')}"
            + _tests_run(t)
            + (f"; shard {t.shard} alone, for merge -- --gather" if t.shard else "")
            + (f"; gathered from {plural(len(t.gathered), 'work dir')}" if t.gathered else "")
        )
    if isinstance(m := full.merge, MergeResult):
        lines.append(
            f"merge       {m.seconds:8.1f} s  {m.executed_functions} of {m.total_functions} "
            f"functions executed (non-zero counts; floor {m.min_functions}{_binary_only(m)}), "
            f"{plural(m.profraw_merged, 'raw profile')} "
            "merged" + (f", {len(m.profraw_dropped)} dropped" if m.profraw_dropped else "")
        )
        lines += shard_summary_lines(m)
        if (h := m.health) is not None:
            lines.append(
                f"health      {h['lost_share']:g} % of the reference's count lost (ceiling {h['max_lost']:g} %): "
                f"{h['lost_functions']} functions it executed did not run; {h['executed']} executed here, "
                f"{h['reference_executed']} there; total count {h['total_count_ratio']:.3g} times its "
                f"({h['reference']})"
            )
    if isinstance(o := full.optimise, OptimiseResult):
        lines += optimise_summary_lines(o)
    if isinstance(tested := full.test, TestResult):
        counts = f"{tested.passed} passed, {tested.failed} failed, {tested.ignored} ignored"
        lines.append(f"test        {tested.seconds:8.1f} s  {counts} (the suite built with the profile)")
    if isinstance(b := full.bolt, BoltResult):
        lines += bolt_summary_lines(b)
    return lines


def shard_summary_lines(m: MergeResult) -> list[str]:
    """Each shard's line (its share asked and reached, what it executed, its count, its overlap with the rest),
    then the main crate's functions no training executed, the largest first."""
    lines = [
        f"shard       {s['name']}: share {100 * s['share_asked']:.1f} % asked, {100 * s['share_reached']:.2f} % "
        f"reached (weight {s['weight']}); {s['executed_functions']} of {s['total_functions']} functions executed, "
        f"{s['only_this_shard']} by no other shard{_main_crate_only(s)}; total count {s['total_count']:,}; "
        f"overlap with the rest {s['overlap_with_rest']:.2f} %{_records_matching(s)}"
        for s in m.shards or []
    ]
    if m.unexecuted_main_crate is not None:
        largest = m.unexecuted_largest or []
        sized = any(f["bytes"] for f in largest)
        heading = (
            f"; the {len(largest)} largest (bytes in the instrumented binary):"
            if sized
            else f"; {len(largest)} of them by name (the instrumented binary's symbol table gives none of them a "
            "size: stripped by the profile's strip, or inlined everywhere):"
        )
        lines.append(
            f"unexecuted  {m.unexecuted_main_crate} functions of the main crate no training executed"
            + (heading if largest else "")
        )
        lines += [
            (f"            {f['bytes']:>8}  " if sized else "            ") + f["name"] + _same_name(f["name"], largest)
            for f in largest
        ]
    return lines


def _same_name(name: str, listed: list[UnexecutedRecord]) -> str:
    """Said of a name that several listed symbols demangle to (a generic's instances, closures of one function),
    which would otherwise read as one function listed twice."""
    count = sum(1 for f in listed if f["name"] == name)
    return f"  (one of {count} symbols of this name)" if count > 1 else ""


def _tests_run(t: TrainResult) -> str:
    """The tests shard's run of the crate's tests."""
    runs = [s["tests"] for s in t.shards or [] if "tests" in s]
    return "".join(f"; the crate's tests: {r['passed']} passed, {r['ignored']} ignored" for r in runs)


def _binary_only(m: MergeResult) -> str:
    """With a tests shard, the merged profile's functions are counted among the binary's only."""
    return "; the binary's functions only" if any("records_matching_binary" in s for s in m.shards or []) else ""


def _main_crate_only(s: ShardRecord) -> str:
    """The tests shard's: how many of the main crate's functions only it executed."""
    return f" ({s['main_crate_only_this_shard']} of the main crate's)" if "main_crate_only_this_shard" in s else ""


def _records_matching(s: ShardRecord) -> str:
    """The tests shard's: how many of its records are the binary's functions, how many are not."""
    if "records_matching_binary" not in s:
        return ""
    matching, other = s["records_matching_binary"], s["records_not_matching_binary"]
    return f"; {matching} of its {matching + other} records match the binary's functions, {other} do not"


def optimise_summary_lines(o: OptimiseResult) -> list[str]:
    lines = [
        f"optimise    {o.seconds:8.1f} s  {o.missing_profile_functions} functions without "
        f"profile, {o.stale_profile_warnings} stale; " + (o.libc or f"glibc {o.max_glibc or 'none'}"),
        f"coverage    {o.main_crate_functions_with_profile} functions of the main crate with a profile record "
        f"(executed or not), {o.main_crate_functions_without_profile} without (rustc warned: no profile data)",
    ]
    if o.partial:
        lines.append(
            f"partial     {o.never_run_functions} functions compiled as unprofiled because the training never ran "
            f"them ({o.never_run_records} records left out of the profile the build read, {o.store_path.name}; "
            "the checks read the whole one)"
        )
    if (c := o.carried) is not None:
        lines.append(
            f"carried     {c.survived_share:g} % of the given profile's count survived (floor {c.min_survival:g} %): "
            f"{c.kept} records as they were, {c.rekeyed} re-keyed, {c.edited} edited, {c.ambiguous} ambiguous, "
            f"{c.gone} gone; {c.new_functions} new functions without a record; {c.builds} "
            + ("build" if c.builds == 1 else "builds")
        )
    if o.crates_compiled is not None:
        lines.append(
            f"observed    rustc received -Cprofile-use in {o.crates_with_profile} of the build's "
            f"{o.crates_compiled} crate compiles (the RUSTC shim's records)"
        )
    c_code = o.c_code
    for crate in c_code["crates"] if c_code else []:
        with_profile, without = crate.get("functions_with_profile", []), crate.get("functions_without_profile", [])
        if not crate["profile_flags"]:  # compiled without the profile: none of its functions used profile data
            with_profile, without = [], sorted({*with_profile, *without})
        lines.append(
            f"c code      {crate['crate']}: {len(with_profile)} C/C++ functions with profile data, {len(without)} "
            f"without ({_compilers_said(crate)})" + _status(c_code, crate, profiled_word=False)
        )
    lines.append(f"binary      {o.binary}")
    lines.append(f"            sha256 {o.binary_sha256}")
    lines.append(f"profile     {o.store_path}")
    if o.verify is not None:
        lines.append(
            f"verify      {o.verify.seconds:8.1f} s  the optimised binary ran the workload ({counted(o.verify)})"
        )
    if o.target_cpu:
        lines.append(f"warning     the flags set target-cpu={o.target_cpu}: not a baseline release build")
    return lines


def bolt_summary_lines(b: BoltResult) -> list[str]:
    before, after = b.dyno_stats["before"], b.dyno_stats["after"]
    lines = [
        f"bolt        {b.seconds:8.1f} s  profile of {b.functions_with_profile} of {b.total_functions} "
        f"functions ({b.profile_main_crate_functions} of the main crate), {b.profile_branches} branches; "
        f"{b.input_bytes} -> {b.binary_bytes} bytes",
    ]
    if b.instrumentation_skipped_functions:
        lines.append(
            f"            {b.instrumentation_skipped_functions} functions left out of BOLT's instrumentation, without "
            f"BOLT profile: names up to {b.longest_function_name or 0} characters overflow its runtime's line (LLVM "
            "issue 169899)"
        )
    for name in ("executed instructions", "taken branches"):
        if name in before and name in after and before[name]:
            change = 100.0 * (after[name] - before[name]) / before[name]
            lines.append(f"            {name}: {before[name]} -> {after[name]} ({change:+.1f} %) (dyno-stats)")
    lines.append(f"binary      {b.binary}")
    lines.append(f"            sha256 {b.binary_sha256}")
    lines.append(f"profile     {b.store_path}")
    lines.append(f"verify      {b.verify.seconds:8.1f} s  the BOLTed binary ran the workload")
    return lines


def c_code_lines(c_code: CCodeRecord | None, *, profiled: bool) -> list[str]:
    """A build's ``c code`` line of each crate whose build script compiled C or C++ for the target: which compilers
    built its C and its C++, and (``profiled``: a build that gives the profile) whether the profile reached it."""
    if not c_code:
        return []
    return [
        f"c code      {crate['crate']}: {_compilers_said(crate)}"
        + (_status(c_code, crate, profiled_word=True) if profiled else "")
        for crate in c_code["crates"]
    ]


def _status(c_code: CCodeRecord | None, crate: CCrateRecord, *, profiled_word: bool) -> str:
    """``; profiled``, or why not; and the languages of the crate the plan left to the build's own compiler."""
    if not c_code:
        return ""
    if not crate["profile_flags"]:
        return f"; {_why_unprofiled(c_code, crate)}"
    left = [
        f"{name} not profiled: {record['off']}"
        if not record["profiled"]
        else f"{name} not profiled: not among the packages of its list"
        for name, record in c_code["languages"].items()
        if name in crate.get("languages", {})
        and (not record["profiled"] or crate["crate"] not in record.get("crates", [crate["crate"]]))
    ]
    return ("; profiled" if profiled_word else "") + "".join(f"; {why}" for why in left)


def _why_unprofiled(c_code: CCodeRecord, crate: CCrateRecord) -> str:
    """Why a crate's C has no profile: the plan left the C alone (``PGO_C=0``, a cross target: its reason), or the
    profile flags did not reach a compiler the plan profiles."""
    languages = list(c_code["languages"].values())
    if crate.get("chosen") is False:
        said = crate.get("languages") or {name: [] for name in c_code["languages"]}
        why = []
        for name in said:
            record = c_code["languages"].get(name)
            if record is None:
                continue  # assembly
            if not record["profiled"] and record["off"]:
                why.append(record["off"])
            elif crate["crate"] not in record.get("crates", [crate["crate"]]):
                why.append(f"not among the packages profiled ({', '.join(record.get('crates', []))})")
        return f"not profiled: {'; '.join(dict.fromkeys(why)) or 'by choice'}"
    if any(lang["profiled"] for lang in languages):
        return "the profile flags did not reach it"
    off = next((lang["off"] for lang in languages if lang["off"]), None)
    return f"not profiled: {off}" if off else "the profile flags did not reach it"


def _compilers_said(crate: CCrateRecord) -> str:
    """The compilers of a crate's C and C++: by language where the build's log said which compiled what."""
    by_language = crate.get("languages")
    if not by_language:
        return ", ".join(_compiler_words(crate["compilers"]))
    return "; ".join(_language_said(lang, found) for lang, found in by_language.items() if found)


def _language_said(lang: str, found: list[str]) -> str:
    """One language's compilers; assembled objects alone are "assembly, not judged" (not "assembly by assembly")."""
    if lang == "assembly" and set(found) == {ASSEMBLED}:
        return "assembly, not judged"
    return f"{lang} by {', '.join(_compiler_words(found))}"


def _compiler_words(compilers: list[str]) -> list[str]:
    """The compilers of a crate's C, an assembled object's ("unknown" in report.json) said as what it is."""
    return ["assembly, not judged" if c == ASSEMBLED else c for c in compilers]
