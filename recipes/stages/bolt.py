"""The bolt stage: the post-link layout optimisation of the optimised binary with llvm-bolt (``PGO_BOLT=1``).

Its own instrumentation and training (or ``PGO_BOLT_PROFILE``), the profile from the store, every check, the
training replayed on the BOLTed binary, then a checked copy in ``<work>/bolted/``. The tools, the input checks
and the parsers of llvm-bolt's files are ``recipes/llvm/boltlib.py`` (``boltlib`` here)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from recipes import report
from recipes.errors import CheckFailed, MissingInput, TrainingFailed
from recipes.files import atomic_output, copy_atomically
from recipes.inputs import read_bytes
from recipes.llvm import boltlib, elf
from recipes.plan import BuildPlan
from recipes.results import BoltResult, Report, WorkloadRun, as_json, from_json
from recipes.runner import capture, run, say
from recipes.stages.frame import StageFrame, checked_copy, run_on
from recipes.store import sha256_file
from recipes.train.trainer import Collect
from recipes.workload import Workload


@dataclass(frozen=True)
class BoltPaths:
    """Where the bolt stage works: ``<work>/bolt/`` (input copy, instrumented copy, raw and merged profile, the
    output before its checks) and the checked copy ``<work>/bolted/<bin>``."""

    dir: Path
    input: Path
    instrumented: Path
    raw: Path
    merged: Path
    skip_file: Path
    output: Path

    @classmethod
    def of(cls, plan: BuildPlan) -> BoltPaths:
        here, name = plan.workdir.bolt, plan.crate.bin
        return cls(
            here,
            here / name,
            here / f"{name}.inst",
            here / "fdata",
            here / f"{name}.fdata",
            here / "skip-funcs.txt",
            here / f"{name}.bolt",
        )


def _bolt_input(plan: BuildPlan, handed: Report | None = None) -> tuple[Path, str, dict[str, int]]:
    """The optimise stage's checked binary, unchanged since, and fit for llvm-bolt."""
    optimised = report.require(plan.work, "optimise", "bolt", handed)
    binary = optimised.binary
    if not binary.is_file():
        raise MissingInput(f"the optimised binary {binary} is gone", "run `nox -s optimise` again")
    sha = sha256_file(binary)
    if sha != optimised.binary_sha256:
        raise CheckFailed(f"{binary} changed since optimise checked it", "run `nox -s optimise` again")
    return binary, sha, boltlib.check_input(binary)


def _left_out(plan: BuildPlan, paths: BoltPaths, known: dict[str, object]) -> list[str]:
    """The functions whose names BOLT's instrumentation runtime could not write (recipes.llvm.boltlib.name_budget),
    their ``-skip-funcs-file`` written to ``<work>/bolt/skip-funcs.txt`` when there are any: the longest name, how
    many were left out and their symbols (the first 50, each cut at 120 characters) into ``known``, and llvm-bolt's
    ``-skip-funcs-file`` argument (none when every name fits)."""
    # binutils' objdump (the linker's package): the calls of each function
    disassembly = capture(["objdump", "-d", "--no-show-raw-insn", "-w", str(paths.input)], env=plan.env)
    budget = boltlib.name_budget(paths.input, disassembly)
    names = [symbols[0][:120] for symbols in budget.skipped.values()][:50]
    paths.skip_file.unlink(missing_ok=True)
    if budget.skipped:
        say(
            f"bolt: {len(budget.skipped)} functions left out of BOLT's instrumentation: their names (up to "
            f"{budget.longest} characters) overflow its runtime's {boltlib.RUNTIME_LINE_BYTES}-byte line (LLVM issue "
            "169899); they get no BOLT profile"
        )
        with atomic_output(paths.skip_file) as tmp:
            tmp.write_text(budget.skip_file_text(), encoding="utf-8")
    known["longest_function_name"] = budget.longest
    known["instrumentation_skipped_functions"] = len(budget.skipped)
    known["instrumentation_skipped"] = names
    return [f"-skip-funcs-file={paths.skip_file.name}"] if budget.skipped else []


def _bolt_train(
    plan: BuildPlan, tools: boltlib.BoltTools, paths: BoltPaths, known: dict[str, object]
) -> tuple[Path, WorkloadRun]:
    """BOLT-instrument the input, replay the training workload on it (every phase check), merge its profiles;
    what it left out of the instrumentation goes into ``known`` (the record so far) at once."""
    instrument_log = plan.logs / "bolt-instrument.log"
    skip_args = _left_out(plan, paths, known)
    run(
        [
            str(tools.llvm_bolt),
            paths.input.name,
            "-instrument",
            f"-instrumentation-file={paths.raw / 'prof'}",
            "-instrumentation-file-append-pid",
            *skip_args,
            "-o",
            paths.instrumented.name,
        ],
        env=plan.env,
        log=instrument_log,
        cwd=paths.dir,
        what="llvm-bolt -instrument",
    )
    workload = plan.require_workload()
    say(f"bolt: the BOLT-instrumented binary runs the workload {workload.path.name}")
    trained = run_on(
        plan,
        workload,
        paths.instrumented,
        logs=plan.logs / "bolt-train",
        scratch="bolt-train",
        collect=Collect.fdata(paths.raw),
    )
    raws = sorted(paths.raw.glob("*.fdata"))  # merge-fdata's output depends on the order of its inputs
    boltlib.check_raw_fdata(paths.raw, raws)
    with atomic_output(paths.merged) as tmp:
        run(
            [str(tools.merge_fdata), *map(str, raws), "-o", str(tmp)],
            env=plan.env,
            log=plan.logs / "bolt-merge.log",
            cwd=paths.dir,
            what="merge-fdata",
        )
        if not tmp.is_file():
            raise MissingInput(f"merge-fdata wrote no {tmp}", f"see {plan.logs / 'bolt-merge.log'}")
    return paths.merged, trained


def bolt(plan: BuildPlan, *, vouched: str | None = None, handed: Report | None = None) -> BoltResult:
    """llvm-bolt on the optimised binary: its own instrumentation and training (or PGO_BOLT_PROFILE), the profile
    from the store, opt-dist's flags (or PGO_BOLT_ARGS), every check, then a checked copy in <work>/bolted/.

    A given profile must have been recorded on this very binary (:func:`recipes.llvm.boltlib.check_trained_on`), unless
    the caller ``vouched`` for it (rebuild: a release's own profile, its result compared with the release's)."""
    with StageFrame(plan, "bolt") as frame:
        paths = BoltPaths.of(plan)
        binary, input_sha, relocations = _bolt_input(plan, handed)
        tools = boltlib.find_bolt(plan.rustc, plan.env, plan.config.llvm_bolt)
        args = boltlib.bolt_args(plan.config.bolt_args)
        say(f"bolt: {binary} with {tools.llvm_bolt} (LLVM {tools.llvm_version})")
        # what an earlier run left goes (not the merged profile: a given profile may be it); the input copied in
        shutil.rmtree(paths.raw, ignore_errors=True)
        for old in (paths.instrumented, paths.output, paths.input, paths.skip_file, checked_copy(plan, "bolt")):
            old.unlink(missing_ok=True)
        paths.raw.mkdir(parents=True)
        copy_atomically(binary, paths.input)
        #: the record so far, in report.json's words: what a failed record keeps, and the result when all is done
        known: dict[str, object] = {
            "input": str(binary),
            "input_sha256": input_sha,
            "relocations": relocations,
            "llvm_bolt": str(tools.llvm_bolt),
            "merge_fdata": str(tools.merge_fdata),
            "llvm_bolt_version": tools.llvm_version,
            "bolt_args": list(args),
        }
        with frame.kept(lambda: known, reject=("the BOLTed binary", paths.output)):  # a failure: recorded, rejected
            profile, instrumented_sha = _profile(plan, tools, paths, known)
            store_path = _store_profile(plan, profile, (binary, input_sha), instrumented_sha, vouched, known)
            _optimise_with(plan, tools, paths, store_path, args, known)
            bolted_sha = _check_bolted(plan, paths, binary, known)
            copy = frame.copy_checked(paths.output, bolted_sha, hint="is another bolt stage writing here?")
            known["binary"] = str(copy)
            workload = plan.require_workload()
            say(f"verify: the BOLTed binary runs the workload {workload.path.name}")
            known["verify"] = as_json(_replay_bolted(plan, workload, copy))
        paths.output.unlink(missing_ok=True)
        return frame.done(from_json(BoltResult, {**known, "seconds": 0.0}))  # the frame's seconds


def _profile(
    plan: BuildPlan, tools: boltlib.BoltTools, paths: BoltPaths, known: dict[str, object]
) -> tuple[Path, str | None]:
    """The BOLT profile: PGO_BOLT_PROFILE, or trained here (and the sha256 of the instrumented binary that wrote
    it); read and checked to be of this crate. Its figures go into ``known``."""
    instrumented_sha: str | None = None
    if plan.config.bolt_profile is not None:
        if not plan.config.bolt_profile.is_file():
            raise MissingInput(
                f"PGO_BOLT_PROFILE={plan.config.bolt_profile}: no such file", "give the path of a .fdata"
            )
        profile = plan.config.bolt_profile
    else:
        profile, trained = _bolt_train(plan, tools, paths, known)
        known["train"] = as_json(trained)
        instrumented_sha = sha256_file(paths.instrumented)
        known["bolt_instrumented_sha256"] = instrumented_sha
    known["trained_here"] = instrumented_sha is not None
    data = read_bytes(profile, "the BOLT profile", MissingInput, "give the path of a .fdata merge-fdata wrote")
    fdata = boltlib.parse_fdata(data.decode("utf-8", errors="replace"))  # a symbol name's bytes are its own
    known.update(fdata.as_json())
    known["profile_main_crate_functions"] = fdata.main_crate_functions(plan.crate.crate_names)
    boltlib.check_profile(fdata, profile, plan.crate.crate_names, plan.crate.package)
    return profile, instrumented_sha


def _store_profile(
    plan: BuildPlan,
    profile: Path,
    input_binary: tuple[Path, str],
    instrumented_sha: str | None,
    vouched: str | None,
    known: dict[str, object],
) -> Path:
    """The profile in the store, with the record of the binary it was trained on: written when it was trained
    here, else checked to be of this input (``input_binary``: its path and sha256) unless the caller
    ``vouched`` for it."""
    binary, input_sha = input_binary
    profile_sha = sha256_file(profile)
    store_record = boltlib.trained_on_path(plan.store.path_for(profile_sha, ".fdata"))
    trained_on = None
    if instrumented_sha is not None:
        trained_on = boltlib.trained_on_record(profile_sha, input_sha, instrumented_sha)
        boltlib.write_trained_on(profile, trained_on)
    elif vouched is None:
        boltlib.check_trained_on(profile, profile_sha, binary, input_sha, store_record)
    known["profile_trained_on"] = input_sha if vouched is None else f"vouched: {vouched}"
    store_path = plan.store.put(profile, suffix=".fdata")
    if trained_on is not None:
        boltlib.write_trained_on(store_path, trained_on)
    known["store_path"] = str(store_path)
    known["profile_sha256"] = plan.store.verify(store_path, "before llvm-bolt")
    return store_path


def _optimise_with(
    plan: BuildPlan,
    tools: boltlib.BoltTools,
    paths: BoltPaths,
    store_path: Path,
    args: tuple[str, ...],
    known: dict[str, object],
) -> None:
    """llvm-bolt on the input with the stored profile; its log read and checked (into ``known``)."""
    log = plan.logs / "bolt-optimise.log"
    paths.output.unlink(missing_ok=True)
    # relative names in <work>/bolt: llvm-bolt writes its command line into the binary (.note.bolt_info)
    run(
        [str(tools.llvm_bolt), paths.input.name, "-o", paths.output.name, f"-data={store_path}", *args],
        env=plan.env,
        log=log,
        cwd=paths.dir,
        what="llvm-bolt",
    )
    plan.store.verify(store_path, "after llvm-bolt")
    if not paths.output.is_file():
        raise MissingInput(f"llvm-bolt left no binary at {paths.output}", f"see {log}")
    summary = boltlib.parse_bolt_log(log.read_text(encoding="utf-8", errors="replace"))
    known.update(summary.as_json())
    boltlib.check_bolt_log(summary, store_path, log)


def _check_bolted(plan: BuildPlan, paths: BoltPaths, binary: Path, known: dict[str, object]) -> str:
    """The BOLTed binary's sha256, libc, glibc and size beside the input's (into ``known``), its glibc checked."""
    bolted_sha = sha256_file(paths.output)
    known.update(
        {
            "binary_sha256": bolted_sha,
            "max_glibc": elf.max_glibc(paths.output),
            "libc": elf.libc_needs(paths.output),
            "input_bytes": binary.stat().st_size,
            "binary_bytes": paths.output.stat().st_size,
        }
    )
    if plan.config.max_glibc:
        elf.check_glibc(paths.output, plan.config.max_glibc)
    return bolted_sha


def _replay_bolted(plan: BuildPlan, workload: Workload, binary: Path) -> WorkloadRun:
    """The training workload on the BOLTed binary, every phase check on; a failure says it was the BOLTed one."""
    try:
        return run_on(plan, workload, binary, logs=plan.logs / "bolt-verify", scratch="bolt-verify")
    except TrainingFailed as error:
        raise CheckFailed(
            f"the BOLTed binary fails the workload: {error.message}",
            f"{error.hint}; the PGO binary ran it: a BOLT miscompile or a PGO_BOLT_ARGS flag",
        ) from error
