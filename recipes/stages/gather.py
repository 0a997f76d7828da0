"""Shards trained on separate machines: one leg per shard, then one gather.

``nox -s train -- --shard NAME`` (:func:`train_shard`) trains one of the configured shards (``PGO_WORKLOAD=a,b``)
with the work dir's instrumented binary, into that shard's own folder (``shards/NAME/profraw``), and records in
report.json's train record what a gather checks: the shard's name, its workload file's sha256, the instrumented
binary's sha256 and GNU build id, and the raw profiles with their sizes and sha256.

``nox -s merge -- --gather DIR…`` (:func:`merge_gathered`), in the work dir where the instrumented binary was
built (or a copy of it): each DIR is a work dir in which a ``train -- --shard`` ran, moved or downloaded whole.
Every DIR, shard and raw profile is checked before llvm-profdata merges anything (:func:`check_legs`,
:func:`check_build_ids`); then each shard's raw profiles are copied into this work dir's shard folder, the train
record says what was gathered from where, and the shards are merged exactly as a one-machine sharded training's
(:func:`recipes.stages.merge._merge_shards`): for command workloads, whose counts are deterministic, the same
profile byte for byte.

The legs train at the work dir's own path: report.json names the instrumented binary by its path in the work dir,
and ``train`` runs only that binary (:func:`recipes.stages.train.instrumented_binary`), so a leg's copy of the work
dir sits at the same ``PGO_OUT`` as the one instrument ran in (a CI runner's ``$RUNNER_TEMP/pgo`` is). The DIRs
gathered may be anywhere: only their files are read, by their place in the folder, never a path they record.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from recipes import report
from recipes.config import TESTS_SHARD
from recipes.errors import CheckFailed, ConfigError, MissingInput
from recipes.llvm import elf, profdata
from recipes.plan import BuildPlan
from recipes.release.reproducible.tags import GATHER, take_all
from recipes.results import InstrumentResult, MergeResult, PhaseRecord, ShardTrainRecord, TrainResult
from recipes.runner import say
from recipes.stages import tests_shard
from recipes.stages.frame import StageFrame, check_runnable, run_on
from recipes.stages.merge import _merge_shards, refuse_other_rustc
from recipes.stages.train import instrumented_binary, shard_record
from recipes.store import sha256_file
from recipes.toolchain.rustc import ProfdataTool, find_profdata, rustc_sysroot
from recipes.train.trainer import Collect
from recipes.workdir import WorkDir
from recipes.workload.shards import Shard

SHARD = "--shard"
#: what to give --gather, the hint of every refusal of a DIR
LEG_HINT = (
    "give --gather the work dirs (PGO_OUT) in which `nox -s train -- --shard NAME` ran, each whole: a copy of this "
    "work dir after `nox -s instrument`, one per shard"
)


def take_shard(posargs: Sequence[str]) -> tuple[str | None, list[str]]:
    """``--shard NAME`` (or ``--shard=NAME``) of ``nox -s train --``: the name (None without it), and the rest."""
    names, rest = take_all(
        posargs, SHARD, "a shard's name", f"write {SHARD} NAME (a shard of PGO_WORKLOAD: its file's stem)"
    )
    if len(names) > 1:
        raise ConfigError(
            f"{SHARD} is given {len(names)} times ({', '.join(names)}): a leg trains one shard",
            "train each shard in its own copy of the work dir, then gather them: `nox -s merge -- --gather DIR…`",
        )
    return (names[0] if names else None), rest


def configured_shard(plan: BuildPlan, name: str) -> Shard:
    """The configured shard ``name``; refused when there are no shards, or it is not one of them."""
    names = [shard.name for shard in plan.shards]
    if not names:
        raise ConfigError(
            f"{SHARD} {name}: no shards are configured (PGO_WORKLOAD names one workload)",
            "name the shards (PGO_WORKLOAD=main,breadth) and give each leg one of them",
        )
    if name not in names:
        raise ConfigError(
            f"{SHARD} {name}: {name} is not a shard of this configuration (the shards: {', '.join(names)})",
            "a shard is named by its workload file's stem: name one of PGO_WORKLOAD's",
        )
    return plan.shards[names.index(name)]


def train_shard(plan: BuildPlan, name: str) -> TrainResult:
    """``train -- --shard NAME``: the shard's workload on the instrumented binary, into the shard's own folder (its
    earlier files gone), recorded for a gather (the module)."""
    shard = configured_shard(plan, name)
    with StageFrame(plan, "train", timed=False) as frame:  # its seconds: the workload run's
        binary = instrumented_binary(plan)
        built = report.require(plan.work, "instrument", "train")
        if shard.workload is None:  # the crate's own tests (recipes/stages/tests_shard.py)
            return frame.done(_train_tests_shard(plan, built, binary))
        check_runnable(plan, [shard.workload])
        workload_sha256 = sha256_file(shard.workload.path)
        build_id = elf.build_id(binary)
        shutil.rmtree(plan.workdir.shard(name), ignore_errors=True)  # a folder of this shard's training alone
        say(f"train: shard {name} alone ({shard.workload.path}), for `nox -s merge -- --gather`")
        folder = plan.workdir.shard_profraw(name)
        run = run_on(plan, shard.workload, binary, logs=plan.logs, scratch="train", collect=Collect.profraw(folder))
        record = shard_record(name, shard.workload, run, folder)
        record["workload_sha256"] = workload_sha256
        _for_gather(record, built, build_id)
        phases: list[PhaseRecord] = [{**p, "name": f"{name}/{p['name']}"} for p in run.phases]
        return frame.done(
            TrainResult(
                seconds=run.seconds,
                requests=run.requests,
                phases=phases,
                scale=run.scale,
                workload=run.workload,
                profraw_files=run.profraw_files,
                profraw=[],
                shards=[record],
                shard=name,
            )
        )


def _train_tests_shard(plan: BuildPlan, built: InstrumentResult, binary: Path) -> TrainResult:
    """``train -- --shard tests``: the crate's tests built as the instrumented build and run into the shard's own
    folder; recorded with the instrumented binary's sha256 and build id (its raw profiles are the test binaries',
    not the instrumented binary's: the gather checks the recorded ones, and no workload file)."""
    tests_shard.check_instrumented_build(plan)
    build_id = elf.build_id(binary)
    shutil.rmtree(plan.workdir.shard(TESTS_SHARD), ignore_errors=True)
    record = tests_shard.train(plan, binary)
    _for_gather(record, built, build_id)
    return TrainResult(
        seconds=record["seconds"],
        requests=record["requests"],
        phases=[],
        scale=plan.config.train_scale,
        workload=plan.workdir.shard(TESTS_SHARD),
        profraw_files=len(record["profraw"]),
        profraw=[],
        shards=[record],
        shard=TESTS_SHARD,
    )


def _for_gather(record: ShardTrainRecord, built: InstrumentResult, build_id: str | None) -> None:
    """What a gather checks of a leg's training: the instrumented binary's sha256 and build id (when it has one)."""
    record["binary_sha256"] = built.binary_sha256
    if build_id is not None:
        record["build_id"] = build_id


@dataclass(frozen=True)
class Leg:
    """A work dir given to ``--gather``: its train record of one shard trained alone."""

    folder: Path
    trained: TrainResult
    record: ShardTrainRecord

    @property
    def name(self) -> str:
        return self.record["name"]

    @property
    def shard_folder(self) -> Path:
        return WorkDir(self.folder).shard(self.name)

    @property
    def profraw(self) -> Path:
        return WorkDir(self.folder).shard_profraw(self.name)


def read_leg(folder: Path) -> Leg:
    """The DIR ``folder``: a work dir whose report.json holds a ``train -- --shard`` that succeeded, with what a
    gather checks."""
    if not folder.is_dir():
        raise MissingInput(f"{GATHER} {folder}: no such folder", LEG_HINT)
    if not WorkDir(folder).report.is_file():
        raise CheckFailed(f"{GATHER} {folder} is not a work dir: it has no report.json", LEG_HINT)
    trained = report.load(folder).train  # a report that does not fit is one line naming the file
    if isinstance(trained, TrainResult):
        record = next((r for r in trained.shards or [] if r["name"] == trained.shard), None)
        no_file = record is not None and record["name"] == TESTS_SHARD  # the tests shard has no workload file
        if record is not None and ("workload_sha256" in record or no_file) and "binary_sha256" in record:
            return Leg(folder, trained, record)
    has = "a training of all the shards" if isinstance(trained, TrainResult) else "no training that succeeded"
    raise CheckFailed(
        f"{GATHER} {folder}: its report.json has no record of a `train -- --shard` that succeeded ({has})", LEG_HINT
    )


def check_legs(plan: BuildPlan, built: InstrumentResult, legs: Sequence[Leg]) -> None:
    """Every shard once, none outside the configuration, each trained by this work dir's instrumented binary
    (its recorded sha256), on this version of its workload file, at this scale, its folder holding only what its
    training wrote, unchanged."""
    configured = {shard.name: shard for shard in plan.shards}
    seen: dict[str, Path] = {}
    for leg in legs:
        if leg.name not in configured:
            raise CheckFailed(
                f"{GATHER} {leg.folder}: its shard {leg.name} is not a shard of this configuration "
                f"(the shards: {', '.join(configured)})",
                "gather with the PGO_WORKLOAD the legs trained with, or leave that work dir out",
            )
        if leg.name in seen:
            raise CheckFailed(
                f"the shard {leg.name} is gathered twice ({seen[leg.name]} and {leg.folder})",
                "give each shard's work dir once: its counts would be added twice",
            )
        seen[leg.name] = leg.folder
    if missing := [name for name in configured if name not in seen]:
        raise CheckFailed(
            f"the shard {missing[0]} is in none of the work dirs gathered"
            + (f" ({len(missing)} shards missing: {', '.join(missing)})" if len(missing) > 1 else ""),
            f"train it (`nox -s train -- --shard {missing[0]}` in a copy of this work dir) and gather its work dir too",
        )
    for leg in legs:
        check_leg(plan, built, configured[leg.name], leg)


def check_leg(plan: BuildPlan, built: InstrumentResult, shard: Shard, leg: Leg) -> None:
    """One leg against this work dir: its binary, its workload file, its scale, its folder."""
    if leg.record["binary_sha256"] != built.binary_sha256:
        raise CheckFailed(
            f"the shard {leg.name} ({leg.folder}) was trained by another instrumented binary (sha256 "
            f"{leg.record['binary_sha256'][:16]}…, this work dir's is {built.binary_sha256[:16]}…)",
            "its counts belong to another build: train every shard with this work dir's instrumented binary, "
            "in copies of it made after `nox -s instrument`",
        )
    if shard.workload is not None and leg.record.get("workload_sha256") != sha256_file(shard.workload.path):
        raise CheckFailed(
            f"the shard {leg.name} ({leg.folder}) was trained on another version of its workload file "
            f"{shard.workload.path} (its sha256 is not the recorded one)",
            "train the shard again with this version of the file, or gather with the version it was trained on",
        )
    if leg.trained.scale != plan.config.train_scale:
        raise CheckFailed(
            f"the shard {leg.name} ({leg.folder}) was trained at PGO_TRAIN_SCALE={leg.trained.scale:g}, "
            f"this configuration's is {plan.config.train_scale:g}",
            "train every shard at the scale the gather is given, or give it the legs' PGO_TRAIN_SCALE",
        )
    refuse_foreign_files(leg)
    profdata.check_raw_profiles(leg.profraw, leg.record["profraw"])  # exactly those recorded, unchanged


def refuse_foreign_files(leg: Leg) -> None:
    """The shard's folder holds only its training's raw profiles (its ``profraw/`` folder and the ``.profraw``
    files there): anything else, a symbolic link too, is not the training's."""
    recorded = {str(entry["name"]) for entry in leg.record["profraw"]}
    for path in sorted(leg.shard_folder.rglob("*")) if leg.shard_folder.is_dir() else []:
        relative = path.relative_to(leg.shard_folder)
        folder = relative == Path("profraw") and path.is_dir()
        written = relative.parent == Path("profraw") and relative.name in recorded and path.is_file()
        if path.is_symlink() or not (folder or written):
            raise CheckFailed(
                f"{path} was not written by the training of shard {leg.name}",
                "a leg's shard folder holds its training's raw profiles only: remove that file, or train the shard "
                "again in a fresh copy of the work dir",
            )


def check_build_ids(plan: BuildPlan, tool: ProfdataTool, build_id: str | None, legs: Sequence[Leg]) -> None:
    """Every raw profile was written by this work dir's instrumented binary: the build id LLVM wrote into it is
    the binary's GNU build id (and so is the build id the leg recorded). Nothing to compare when the binary has
    none."""
    if build_id is None:
        say("merge: the instrumented binary has no GNU build id: the raw profiles are checked by sha256 alone")
        return
    for leg in legs:
        recorded = leg.record.get("build_id")
        if recorded is not None and recorded != build_id:
            raise CheckFailed(
                f"the shard {leg.name} ({leg.folder}) was trained by a binary of build id {recorded}, not this work "
                f"dir's instrumented binary ({build_id})",
                "train every shard with this work dir's instrumented binary, in copies of it made after "
                "`nox -s instrument`",
            )
        if leg.name == TESTS_SHARD:  # written by the test binaries: the recorded build id is the instrumented one's
            continue
        for entry in leg.record["profraw"]:
            raw = leg.profraw / str(entry["name"])
            log = plan.logs / f"gather-{leg.name}-binary-ids.log"
            ids = profdata.binary_ids(tool, raw, env=plan.env, log=log)
            if build_id not in ids:
                written_by = f"a binary of build id {', '.join(ids)}" if ids else "a binary without a build id"
                raise CheckFailed(
                    f"{raw} was written by {written_by}, not by this work dir's instrumented binary ({build_id})",
                    "its counts belong to another build: train the shard again with this work dir's instrumented "
                    "binary",
                )


def collect(plan: BuildPlan, legs: Sequence[Leg]) -> list[Leg]:
    """Each leg's raw profiles copied into this work dir's folder of its shard (emptied first; a leg that is this
    work dir is left as it is); the legs in the configuration's order."""
    by_name = {leg.name: leg for leg in legs}
    for leg in legs:
        target = plan.workdir.shard(leg.name)
        if leg.shard_folder.resolve() == target.resolve():
            continue
        shutil.rmtree(target, ignore_errors=True)
        profraw = plan.workdir.shard_profraw(leg.name)
        profraw.mkdir(parents=True)
        for entry in leg.record["profraw"]:
            shutil.copyfile(leg.profraw / str(entry["name"]), profraw / str(entry["name"]))
    return [by_name[shard.name] for shard in plan.shards]


def gathered_training(ordered: Sequence[Leg]) -> TrainResult:
    """The train record of the gathered shards (``ordered`` as configured): their runs added up, as a one-machine
    sharded training's, and the work dirs they came from."""
    return TrainResult(
        seconds=round(sum(leg.trained.seconds for leg in ordered), 3),
        requests=sum(leg.trained.requests for leg in ordered),
        phases=[p for leg in ordered for p in leg.trained.phases],
        scale=ordered[0].trained.scale,
        workload=ordered[0].trained.workload,
        profraw_files=sum(leg.trained.profraw_files or 0 for leg in ordered),
        profraw=[],
        shards=[leg.record for leg in ordered],
        gathered=[str(leg.folder) for leg in ordered],
    )


def merge_gathered(plan: BuildPlan, folders: Sequence[Path]) -> MergeResult:
    """``merge -- --gather DIR…``: the shards trained in those work dirs checked, collected and merged (the
    module); nothing is merged, copied or recorded as trained until every check has passed."""
    with StageFrame(plan, "merge") as frame:
        refuse_other_rustc(plan)
        if not plan.shards:
            raise ConfigError(
                f"merge {GATHER}: no shards are configured (PGO_WORKLOAD names one workload)",
                "give the gather the PGO_WORKLOAD (two or more shards) the legs trained with",
            )
        built = report.require(plan.work, "instrument", f"merge {GATHER}")
        binary = instrumented_binary(plan)
        legs = [read_leg(folder) for folder in folders]
        check_legs(plan, built, legs)
        tool = find_profdata(plan.rustc, rustc_sysroot(plan.env), plan.env, plan.config.llvm_profdata)
        check_build_ids(plan, tool, elf.build_id(binary), legs)
        say(f"merge: {len(legs)} shards gathered from {', '.join(str(leg.folder) for leg in legs)}")
        ordered = collect(plan, legs)
        report.record(plan.work, "train", gathered_training(ordered))
        report.start(plan.work, "merge")  # recording the training dropped the merge's running record
        return _merge_shards(plan, frame, [leg.record for leg in ordered])
