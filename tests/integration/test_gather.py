"""Shards trained on separate machines, on hello: one instrumented build for the module, two small command shards
(``main``, ``breadth``) each trained alone by ``nox -s train -- --shard`` in its own copy of the work dir (a matrix
leg's), then gathered by ``nox -s merge -- --gather DIR…`` in another copy: the same profile, byte for byte, as the
one-machine sharded training's; and every refusal of what a gather must not merge.

The legs train at the work dir's own path (report.json names the instrumented binary by it): each leg is trained in
a fresh copy of the instrumented work dir put back at its path, then moved aside, as a CI leg's artifact would be.
The refusals of what is read (the DIRs, their records, their files) are checked on the plan in-process; those of
the session (its posargs, a leg trained elsewhere) through nox."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from recipes.config import load_config
from recipes.errors import PgoError
from recipes.llvm import elf, profdata
from recipes.plan import BuildPlan, make_plan
from recipes.stages import gather
from recipes.toolchain.rustc import ProfdataTool
from tests.conftest import Pipeline, assert_ok, assert_refused

WORKLOAD = """[workload]
description = "{name}: a shard of hello's training"

[[instance]]
name = "cli"
mode = "command"
{phases}
"""


def _phase(name: str, args: list[str], runs: int) -> str:
    return f'\n[[instance.phase]]\nname = "{name}"\nkind = "command"\nargs = {json.dumps(args)}\nruns = {runs}\n'


SHARDS = {
    "main": _phase("collatz", ["collatz", "2000"], 2) + _phase("checksum", ["checksum", "profile guided"], 1),
    "breadth": _phase("primes", ["primes", "5000"], 1) + _phase("words", ["words", "a b a"], 1),
}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _report(work: Path) -> dict[str, Any]:
    data = json.loads((work / "report.json").read_text())
    assert isinstance(data, dict)
    return data


@dataclass(frozen=True)
class Legs:
    pipeline: Pipeline
    pristine: Path  # the work dir after instrument, before any training
    legs: dict[str, Path]  # shard: the work dir it was trained in, moved aside
    reference: dict[str, Any]  # the one-machine sharded training's merge record
    env: dict[str, str]

    @property
    def work(self) -> Path:
        return self.pipeline.work

    def fresh(self) -> Path:
        """The work dir put back as instrument left it; returns it."""
        shutil.rmtree(self.work, ignore_errors=True)
        shutil.copytree(self.pristine, self.work, symlinks=True)
        return self.work

    def copy_leg(self, name: str, where: Path) -> Path:
        """A copy of a leg's work dir to change (the module's legs stay as trained)."""
        shutil.copytree(self.legs[name], where, symlinks=True)
        return where

    def nox(self, session: str, *posargs: str, **extra: str) -> Any:
        return self.pipeline.nox(session, *posargs, **{**self.env, **extra})

    def plan(self) -> BuildPlan:
        env = self.pipeline.env(**self.env)
        config = load_config(self.pipeline.crate_dir, env)
        return make_plan(config, env, instruments=False, profdata=True, bolt=False)


@pytest.fixture(scope="module")
def legs(tmp_path_factory: pytest.TempPathFactory) -> Legs:
    root = tmp_path_factory.mktemp("gather")
    pipeline = Pipeline(root, "hello")
    paths = []
    for name, phases in SHARDS.items():
        path = root / "workloads" / f"{name}.toml"
        path.parent.mkdir(exist_ok=True)
        path.write_text(WORKLOAD.format(name=name, phases=phases))
        paths.append(str(path))
    env = {"PGO_WORKLOAD": ",".join(paths), "PGO_WEIGHTS": "main=9,breadth=1"}
    assert_ok(pipeline.nox("instrument", **env))
    pristine = root / "pristine"
    shutil.copytree(pipeline.work, pristine, symlinks=True)
    made = Legs(pipeline, pristine, {}, {}, env)
    for name in SHARDS:
        made.fresh()
        assert f"; shard {name} alone, for merge -- --gather" in assert_ok(made.nox("train", "--shard", name))
        made.legs[name] = root / "legs" / name
        shutil.copytree(pipeline.work, made.legs[name], symlinks=True)
    made.fresh()  # the one-machine training of both shards, in the same instrumented work dir
    assert_ok(made.nox("train"))
    assert_ok(made.nox("merge"))
    made.reference.update(_report(pipeline.work)["merge"])
    made.fresh()
    return made


def test_gathered_shards_give_the_one_machine_profile_byte_for_byte(legs: Legs) -> None:
    work = legs.fresh()
    output = assert_ok(legs.nox("merge", "--gather", str(legs.legs["breadth"]), str(legs.legs["main"])))
    merged = _report(work)["merge"]
    assert merged["profile_sha256"] == legs.reference["profile_sha256"]
    assert _sha256(Path(merged["profile"])) == legs.reference["profile_sha256"]
    assert [s["profile_sha256"] for s in merged["shards"]] == [s["profile_sha256"] for s in legs.reference["shards"]]
    assert [s["weight"] for s in merged["shards"]] == [s["weight"] for s in legs.reference["shards"]]
    trained = _report(work)["train"]
    assert trained["gathered"] == [str(legs.legs["main"]), str(legs.legs["breadth"])]  # the configuration's order
    assert [s["name"] for s in trained["shards"]] == ["main", "breadth"]
    assert "shard       main:" in output
    assert "; gathered from 2 work dirs" in output
    # the same work dir goes on: optimise takes the gathered profile
    assert_ok(legs.nox("optimise"))


def test_a_shard_trained_in_the_gathering_work_dir_itself(legs: Legs) -> None:
    """The instrument's runner may train a shard too: its own work dir is then one of the DIRs, its shard folder
    left in place."""
    work = legs.fresh()
    assert_ok(legs.nox("train", "--shard", "main"))
    assert_ok(legs.nox("merge", "--gather", str(work), str(legs.legs["breadth"])))
    assert _report(work)["merge"]["profile_sha256"] == legs.reference["profile_sha256"]


def test_train_shard_records_what_a_gather_checks(legs: Legs, tmp_path: Path) -> None:
    leg = legs.legs["main"]
    report = _report(leg)
    trained = report["train"]
    assert trained["shard"] == "main"
    [record] = trained["shards"]
    workload = Path(record["workload"])
    assert record["workload_sha256"] == _sha256(workload)
    binary = Path(report["instrument"]["binary"])
    assert record["binary_sha256"] == report["instrument"]["binary_sha256"] == _sha256(binary)
    assert record["build_id"] == elf.build_id(binary)
    folder = leg / "shards" / "main"
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")) == sorted(
        ["profraw", *(f"profraw/{r['name']}" for r in record["profraw"])]
    )
    for raw in record["profraw"]:
        path = folder / "profraw" / raw["name"]
        assert (path.stat().st_size, _sha256(path)) == (raw["size"], raw["sha256"])
    # LLVM wrote the binary's build id into each raw profile: what the gather compares
    tool = ProfdataTool(Path(legs.reference["llvm_profdata"]), "22")
    ids = profdata.binary_ids(tool, folder / "profraw" / record["profraw"][0]["name"], env={}, log=tmp_path / "ids.log")
    assert ids == [record["build_id"]]
    assert all(p["name"].startswith("main/") for p in trained["phases"])
    assert "merge" not in report


def _flip_build_id(raw: Path, build_id: str) -> None:
    """The build id in the raw profile's header changed by one byte: a profile another binary wrote."""
    data = bytearray(raw.read_bytes())
    at = data.find(bytes.fromhex(build_id))
    assert at >= 0
    data[at] ^= 0xFF
    raw.write_bytes(bytes(data))


def _rerecord(leg: Path, train: dict[str, Any] | None = None, **shard_keys: str) -> None:
    """The leg's train record with ``train``'s keys and its shard's ``shard_keys`` changed, and its raw profiles
    measured again (what a leg trained otherwise would have recorded)."""
    path = leg / "report.json"
    data = json.loads(path.read_text())
    [shard] = data["train"]["shards"]
    data["train"].update(train or {})
    shard.update(shard_keys)
    for raw in shard["profraw"]:
        file = leg / "shards" / shard["name"] / "profraw" / raw["name"]
        raw["size"], raw["sha256"] = file.stat().st_size, _sha256(file)
    path.write_text(json.dumps(data))


def _case(name: str, tmp: Path, legs: Legs) -> tuple[list[Path], tuple[str, ...]]:
    """The DIRs of one refused gather, and the words of its refusal."""
    main, breadth = legs.legs["main"], legs.legs["breadth"]
    if name == "not-a-work-dir":
        (tmp / "empty").mkdir()
        return [main, tmp / "empty"], ("is not a work dir: it has no report.json",)
    if name == "no-shard-record":
        return [main, legs.pristine], ("has no record of a `train -- --shard` that succeeded",)
    if name == "twice":
        return [main, breadth, legs.copy_leg("main", tmp / "again")], ("the shard main is gathered twice",)
    if name == "missing":
        return [main], ("the shard breadth is in none of the work dirs gathered",)
    if name == "not-configured":
        other = legs.copy_leg("breadth", tmp / "other")
        (other / "shards" / "breadth").rename(other / "shards" / "other")
        _rerecord(other, {"shard": "other"}, name="other")
        return [main, breadth, other], ("its shard other is not a shard of this configuration",)
    if name == "other-binary":
        other = legs.copy_leg("breadth", tmp / "other")
        _rerecord(other, binary_sha256="0" * 64)
        return [main, other], ("the shard breadth", "was trained by another instrumented binary")
    if name == "other-build-id":
        other = legs.copy_leg("breadth", tmp / "other")
        raw = next((other / "shards" / "breadth" / "profraw").glob("*.profraw"))
        _flip_build_id(raw, json.loads((other / "report.json").read_text())["train"]["shards"][0]["build_id"])
        _rerecord(other)  # its record made to match: only the build id tells
        return [main, other], (f"{raw.name} was written by a binary of build id", "not by this work dir's")
    if name == "other-workload":
        other = legs.copy_leg("breadth", tmp / "other")
        _rerecord(other, workload_sha256="f" * 64)
        return [main, other], ("was trained on another version of its workload file",)
    if name == "other-scale":
        other = legs.copy_leg("breadth", tmp / "other")
        _rerecord(other, {"scale": 0.5})
        return [main, other], ("was trained at PGO_TRAIN_SCALE=0.5, this configuration's is 1",)
    if name == "foreign-file":
        other = legs.copy_leg("breadth", tmp / "other")
        (other / "shards" / "breadth" / "notes.txt").write_text("mine\n")
        return [main, other], ("notes.txt was not written by the training of shard breadth",)
    assert name == "changed-profraw"
    other = legs.copy_leg("breadth", tmp / "other")
    raw = next((other / "shards" / "breadth" / "profraw").glob("*.profraw"))
    raw.write_bytes(raw.read_bytes() + b"\0" * 8)
    return [main, other], (f"{raw.name} changed since the training wrote it",)


@pytest.mark.refuses(
    "gather-dir-not-a-work-dir",
    "gather-dir-no-shard-training",
    "gather-shard-twice",
    "gather-shard-missing",
    "gather-shard-not-configured",
    "gather-other-instrumented-binary",
    "gather-other-build-id",
    "gather-other-workload-version",
    "gather-other-scale",
    "gather-foreign-file",
    "gather-raw-profile-changed",
)
@pytest.mark.parametrize(
    "case",
    [
        "not-a-work-dir",
        "no-shard-record",
        "twice",
        "missing",
        "not-configured",
        "other-binary",
        "other-build-id",
        "other-workload",
        "other-scale",
        "foreign-file",
        "changed-profraw",
    ],
)
def test_a_gather_refuses_what_it_must_not_merge(legs: Legs, tmp_path: Path, case: str) -> None:
    """Each refusal in one line, before llvm-profdata merges anything: nothing copied, no train record of the
    gather, no merged profile."""
    work = legs.fresh()
    dirs, words = _case(case, tmp_path, legs)
    plan = legs.plan()
    with pytest.raises(PgoError) as refused:
        gather.merge_gathered(plan, dirs)
    line = refused.value.line()
    assert "\n" not in line
    for fragment in words:
        assert fragment in line, line
    assert not (work / "shards").exists()
    assert not plan.merged_profile.exists()
    report = _report(work)
    assert "train" not in report
    assert "failed" in report["merge"]


@pytest.mark.refuses("gather-dir-not-a-work-dir", "gather-other-instrumented-binary")
def test_the_session_refuses_in_one_line(legs: Legs, tmp_path: Path) -> None:
    legs.fresh()
    other = legs.copy_leg("breadth", tmp_path / "other")
    _rerecord(other, binary_sha256="0" * 64)
    assert_refused(
        legs.nox("merge", "--gather", str(legs.legs["main"]), str(other)), "was trained by another instrumented binary"
    )
    assert_refused(legs.nox("merge", "--gather", "no-such-dir"), "no-such-dir: no such folder")


@pytest.mark.refuses("train-shard-not-configured", "gather-posargs")
def test_posargs_and_an_unknown_shard_are_refused(legs: Legs) -> None:
    legs.fresh()
    assert_refused(legs.nox("train", "--shard", "other"), "other is not a shard of this configuration")
    assert_refused(legs.nox("train", "--shard"), "--shard needs a shard's name")
    assert_refused(legs.nox("merge", "--gather"), "--gather needs at least one folder")
    one = {"PGO_WORKLOAD": legs.env["PGO_WORKLOAD"].split(",")[0], "PGO_WEIGHTS": ""}
    assert_refused(legs.nox("train", "--shard", "main", **one), "no shards are configured")


def test_a_leg_elsewhere_than_the_instrumented_work_dir_is_refused(legs: Legs, tmp_path: Path) -> None:
    """The limit: a leg trains at the work dir's own path, where report.json says the instrumented binary is."""
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(legs.pristine, elsewhere, symlinks=True)
    assert_refused(
        legs.nox("train", "--shard", "main", PGO_OUT=str(elsewhere)), "as the instrumented binary, not", "elsewhere"
    )
