"""The coverage check: does the training exercise what the bench measures?

The bench's scenarios run once on the work dir's instrumented binary (one trial's count each), their raw
profiles are merged with rustc's own llvm-profdata, and the result is compared with the training's profile:

- ``llvm-profdata overlap <training> <bench>``: the edge profile overlap (the share of the bench's edge counts,
  function by function, that the training's counts also have, both normalised; 100 % when the two run the same
  code in the same proportions);
- the functions the bench executed and the training never did, the hottest ten (by the sum of their counters
  in the bench's profile), demangled.

A scenario that gets slower with the profile then has an explanation to look at, not just a figure.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from recipes import report
from recipes.bench.commands import run_command, stdin_file
from recipes.bench.load import load_argvs, run_loads, trial_problem
from recipes.bench.meta import CCoverage, CCrateCoverage, Coverage
from recipes.bench.servers import start_server, stop_server
from recipes.bench.settings import Build, Place, Settings, Setup, instance_env
from recipes.config import Config
from recipes.errors import PgoError
from recipes.llvm import profdata
from recipes.plan import BuildPlan
from recipes.procs import describe_exit
from recipes.results import OptimiseResult
from recipes.runner import capture, run, say
from recipes.store import sha256_file
from recipes.toolchain import cflags
from recipes.toolchain.rustc import ProfdataTool, find_profdata, rustc_sysroot

TOP = 10

_RECORD = re.compile(r"^  (?P<name>\S.*):$")
_FUNCTION_COUNT = re.compile(r"^    Function count: (?P<count>\d+)$")
_BLOCK_COUNTS = re.compile(r"^    Block counts: \[(?P<counts>[\d, ]*)\]$")
_HASH_SUFFIX = re.compile(r"::h[0-9a-f]{16}$")


def parse_counts(text: str) -> dict[str, int]:
    """``llvm-profdata show --all-functions --counts``: each function record's counters added up (its entry
    count and its block counts), by symbol (a local function's ``cgu;`` prefix dropped); records of one
    symbol are added together."""
    return by_symbol(parse_record_counts(text))


def by_symbol(counts: Mapping[str, int]) -> dict[str, int]:
    """Counts by record name (:func:`parse_record_counts`) by symbol: a local function's ``cgu;`` (a C file's
    ``<source>;``) prefix dropped, the records of one symbol added together."""
    found: dict[str, int] = {}
    for name, count in counts.items():
        symbol = name.rsplit(";", 1)[-1]
        found[symbol] = found.get(symbol, 0) + count
    return found


def parse_record_counts(text: str) -> dict[str, int]:
    """``llvm-profdata show --all-functions --counts``: each function record's counters added up (its entry
    count and its block counts), by the record's name (a local function's ``<cgu or source file>;<symbol>``)."""
    counts: dict[str, int] = {}
    name: str | None = None
    for line in text.splitlines():
        record = _RECORD.match(line)
        if record:
            name = record.group("name")
            counts.setdefault(name, 0)
            continue
        if name is None:
            continue
        entry = _FUNCTION_COUNT.match(line)
        if entry:
            counts[name] += int(entry.group("count"))
            continue
        blocks = _BLOCK_COUNTS.match(line)
        if blocks:
            counts[name] += sum(int(c) for c in blocks.group("counts").replace(",", " ").split())
    return counts


def untrained_hot(
    bench: Mapping[str, int], training: Mapping[str, int], top: int | None = TOP
) -> list[tuple[str, int]]:
    """The ``top`` functions (None: all) with the most counts in the bench that have none in the training."""
    missed = [(name, count) for name, count in bench.items() if count > 0 and training.get(name, 0) == 0]
    return sorted(missed, key=lambda item: (-item[1], item[0]))[:top]


def c_coverage(crates: Mapping[str, Sequence[str]], bench: Mapping[str, int], training: Mapping[str, int]) -> CCoverage:
    """The C and C++ functions of the target's build scripts (``crates``: package -> its objects' functions, as the
    profiles name them: :func:`recipes.toolchain.cflags.function_keys`) in the two profiles (``bench``,
    ``training``: counts by record name): how many the training executed (profile data with counts) and how many it
    did not, how many the bench executed, and those the bench executed that the training never did."""
    per_crate: list[CCrateCoverage] = []
    for crate, functions in sorted(crates.items()):
        names = sorted(set(functions))
        trained = [f for f in names if training.get(f, 0) > 0]
        benched = [f for f in names if bench.get(f, 0) > 0]
        per_crate.append(
            {
                "crate": crate,
                "functions": len(names),
                "with_training_counts": len(trained),
                "without_training_counts": len(names) - len(trained),
                "bench_executed": len(benched),
                "bench_untrained": [f for f in benched if training.get(f, 0) == 0],
            }
        )
    return {
        "functions": sum(c["functions"] for c in per_crate),
        "with_training_counts": sum(c["with_training_counts"] for c in per_crate),
        "without_training_counts": sum(c["without_training_counts"] for c in per_crate),
        "bench_executed": sum(c["bench_executed"] for c in per_crate),
        "bench_untrained": sorted(f for c in per_crate for f in c["bench_untrained"]),
        "crates": per_crate,
    }


def c_functions(target_dir: Path, triple: str, records: Iterable[str]) -> dict[str, list[str]]:
    """The C and C++ functions of each target build script in ``target_dir`` (the instrumented build's), as the
    profile's ``records`` name them (:func:`recipes.toolchain.cflags.function_keys`): a static function by its
    source file and name, so that two of one name in two files are two, and their counts are their own."""
    commands = cflags.script_commands(target_dir, triple)
    return {
        crate: cflags.function_keys(objects, commands.get(crate, []), records)
        for crate, objects in cflags.c_objects(target_dir, triple).items()
    }


_DISAMBIGUATOR = re.compile(r"\[[0-9a-f]+\]")


def crate_paths(names: Sequence[str], crate: str) -> set[str]:
    """The demangled ``names`` that are ``crate``'s own functions (``crate::…``, or an impl of one of its types:
    ``<crate::…``), a v0 name's crate disambiguators (``[1a2b…]``) dropped."""
    own = (f"{crate}::", f"<{crate}::")
    paths = {_DISAMBIGUATOR.sub("", name) for name in names}
    return {name for name in paths if name.startswith(own)}


def executed_overlap(first: Sequence[str], second: Sequence[str]) -> dict[str, int | float]:
    """Two trainings' executed functions (as paths, so two targets' symbol hashes do not matter): how many each
    executed, how many both did, and both's share of the union (1.0: the same functions)."""
    a, b = set(first), set(second)
    union = a | b
    return {
        "first": len(a),
        "second": len(b),
        "both": len(a & b),
        "only_first": len(a - b),
        "only_second": len(b - a),
        "share": len(a & b) / len(union) if union else 1.0,
    }


def demangler(tool: ProfdataTool, env: Mapping[str, str]) -> Path | None:
    """llvm-cxxfilt of the same LLVM (beside llvm-profdata, or ``llvm-cxxfilt-<major>``), else any on ``env``'s
    PATH."""
    beside = tool.path.with_name(tool.path.name.replace("profdata", "cxxfilt"))
    if beside != tool.path and beside.is_file():
        return beside
    path = env.get("PATH", os.defpath)
    found = shutil.which(f"llvm-cxxfilt-{tool.llvm_major}", path=path) or shutil.which("llvm-cxxfilt", path=path)
    return Path(found) if found else None


#: the escapes of Rust's legacy mangling, which llvm-cxxfilt leaves in the names it demangles
_LEGACY_ESCAPES = {
    "$LT$": "<",
    "$GT$": ">",
    "$C$": ",",
    "$RF$": "&",
    "$BP$": "*",
    "$SP$": "@",
    "$LP$": "(",
    "$RP$": ")",
}
_LEGACY_ESCAPE = re.compile(r"\$(?:LT|GT|C|RF|BP|SP|LP|RP)\$|\$u([0-9a-f]{2,6})\$")


def unescape_legacy(name: str) -> str:
    """``_$LT$a..B$u20$as$u20$c..D$GT$::f`` -> ``<a::B as c::D>::f``: what rustc-demangle does after the
    Itanium-style split (a path component's ``_$`` prefix, ``..`` for ``::``, ``$LT$``-style and ``$uXX$``
    escapes)."""
    name = re.sub(r"(^|::)_\$", r"\1$", name).replace("..", "::")

    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        return chr(int(code, 16)) if code else _LEGACY_ESCAPES[match.group(0)]

    return _LEGACY_ESCAPE.sub(one, name)


def demangle(names: list[str], program: Path | None, env: Mapping[str, str]) -> list[str]:
    """Rust symbols (legacy and v0) as paths, their hash suffix dropped; as they are without a demangler."""
    if program is None or not names:
        return names
    try:
        lines = capture([str(program), *names], env=env).splitlines()
    except PgoError:
        return names
    if len(lines) != len(names):
        return names
    return [unescape_legacy(_HASH_SUFFIX.sub("", line.strip())) for line in lines]


def _counts(tool: ProfdataTool, profile: Path, env: Mapping[str, str], log: Path) -> dict[str, int]:
    """The counts of each record of ``profile``, by its name (:func:`parse_record_counts`)."""
    argv = [str(tool.path), "show", "--all-functions", "--counts", str(profile)]
    return parse_record_counts(run(argv, env=env, log=log, what="llvm-profdata show").output())


def skipped(why: str) -> Coverage:
    say(f"bench: coverage check skipped: {why}")
    return {"skipped": why}


def checker(plan: BuildPlan) -> Callable[[Settings, Setup], Coverage]:
    """The coverage check of ``plan``'s work dir, to run once the bench's setup is up."""

    def check(settings: Settings, setup: Setup) -> Coverage:
        try:
            return run_check(plan, settings, setup)
        except PgoError as error:  # said in the report, not decisive: the bench itself is
            return skipped(error.line())

    return check


def checker_for_given(
    config: Config,
    candidates: Sequence[Path],
    make_plan: Callable[[], BuildPlan],
) -> Callable[[Settings, Setup], Coverage]:
    """The coverage check when the candidates were given by path: run when one of them is the work dir's
    own checked PGO binary (its sha256 is report.json's ``optimise.binary_sha256``), skipped otherwise, for
    then the training profile is not theirs."""
    recorded = report.load(config.out).optimise
    sha = recorded.binary_sha256 if isinstance(recorded, OptimiseResult) else None
    if not sha or not any(candidate.is_file() and sha256_file(candidate) == sha for candidate in candidates):
        why = (
            f"the candidates were given by path and none is the work dir's PGO binary (sha256 {sha[:12]}…), "
            "whose training it compares"
            if sha
            else f"the candidates were given by path and the work dir {config.out} has no PGO binary whose "
            "training to compare"
        )
        return lambda *_: skipped(why)  # said when the check would run
    return checker(make_plan())


def run_check(plan: BuildPlan, settings: Settings, setup: Setup) -> Coverage:
    instrumented, training = plan.instrumented_binary, plan.merged_profile
    if not instrumented.is_file() or not training.is_file():
        return skipped(f"no instrumented binary and training profile in {plan.work} (a PGO_PROFDATA build?)")
    root = settings.out.coverage
    shutil.rmtree(root, ignore_errors=True)
    profraw = root / "profraw"
    profraw.mkdir(parents=True)
    env = {**settings.env, "LLVM_PROFILE_FILE": str(profraw / "bench-%m-%p.profraw")}
    build = Build("instrumented", instrumented)
    problems: list[str] = []
    say(f"bench: coverage check: each scenario once on {instrumented}")
    for scenario in (s.scaled(settings.scale) for s in settings.scenarios):
        workdir = root / "runs" / scenario.name
        workdir.mkdir(parents=True)
        at = Place(scenario, settings, setup, workdir)
        if scenario.kind == "command":
            scenario_env = {**instance_env(scenario.instance, settings.env, setup.values), **env}
            stdin = stdin_file(scenario, setup.values, scenario_env, workdir)
            runs = run_command(
                instrumented, at, scenario.count, core=None, env=scenario_env, log=workdir / "runs.log", stdin=stdin
            )
            if runs.problem:
                problems.append(f"{scenario.name}: {runs.problem}")
            continue
        server = start_server(build, at, core=None, name="instrumented", env=env)
        try:
            argvs = load_argvs(scenario, server, scenario.count, workdir / "uris.txt", setup.values)
            load = run_loads(argvs, at, workdir / "load.log")
            why = trial_problem(load, scenario.count, scenario.expect)
            if why:
                problems.append(f"{scenario.name}: {why}")
        finally:
            code = stop_server(server, scenario.instance.options.stop_timeout)
            shutil.rmtree(server.instance_dir, ignore_errors=True)
        if code != 0:
            problems.append(f"{scenario.name}: the server exited with {describe_exit(code)} (no profile written)")
    raws = sorted(profraw.glob("*.profraw"))
    tool = find_profdata(plan.rustc, rustc_sysroot(plan.env), plan.env, plan.config.llvm_profdata)
    logs = settings.out.logs
    bench_profile = root / "bench.profdata"
    profdata.merge(tool, raws, bench_profile, env=plan.env, log=logs / "coverage-merge.log", drop_bad=True)
    overlap = profdata.overlap(tool, training, bench_profile, env=plan.env, log=logs / "coverage-overlap.log")
    bench_records = _counts(tool, bench_profile, plan.env, logs / "coverage-show-bench.log")
    training_records = _counts(tool, training, plan.env, logs / "coverage-show-training.log")
    bench_counts, training_counts = by_symbol(bench_records), by_symbol(training_records)
    untrained = untrained_hot(bench_counts, training_counts, top=None)
    hot = untrained[:TOP]
    names = demangle([name for name, _ in hot], demangler(tool, plan.env), plan.env)
    result: Coverage = {
        "instrumented": str(instrumented),
        "training_profile": str(training),
        "bench_profile": str(bench_profile),
        "overlap_percent": overlap,
        "bench_functions": sum(1 for c in bench_counts.values() if c > 0),
        "bench_functions_untrained": len(untrained),
        "untrained_hot_functions": [
            {"function": name, "symbol": symbol, "count": count}
            for name, (symbol, count) in zip(names, hot, strict=True)
        ],
        "problems": problems,
    }
    functions = c_functions(plan.generate_dir, plan.triple, training_records)
    if functions:
        c_code = result["c_code"] = c_coverage(functions, bench_records, training_records)
        say(
            f"bench: coverage: {c_code['functions']} C/C++ functions of build scripts, {c_code['with_training_counts']}"
            f" with training counts, {c_code['without_training_counts']} without; the bench executed "
            f"{c_code['bench_executed']}, {len(c_code['bench_untrained'])} of them never in training"
        )
    say(
        f"bench: coverage: edge profile overlap with the training {overlap:.2f} %; "
        f"{result['bench_functions_untrained']} of {result['bench_functions']} functions the bench executed were "
        "never executed in training"
    )
    return result
