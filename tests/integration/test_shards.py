"""Shards on hello: two small command workloads (``main``: collatz and checksums, ``breadth``: primes and words)
trained into their own folders, merged alone, then together at weights 9:1; the shares reached, the per-shard
record, the untrained functions, the single-workload profile unchanged, and a failed shard leaving nothing merged.

One instrumented build for the module (``sharded``); each test trains and merges (seconds)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from recipes.errors import CheckFailed
from recipes.llvm import profdata
from recipes.stages.merge import refuse_empty_shard
from recipes.toolchain.rustc import ProfdataTool
from recipes.workload.shards import TOLERANCE
from tests.conftest import Pipeline, assert_ok, assert_refused, clean_env

WORKLOAD = """[workload]
description = "{name}: a shard of hello's training"
{extra}

[[instance]]
name = "cli"
mode = "command"
{phases}
"""


def _phase(name: str, args: list[str], runs: int) -> str:
    return f'\n[[instance.phase]]\nname = "{name}"\nkind = "command"\nargs = {json.dumps(args)}\nruns = {runs}\n'


MAIN = _phase("collatz", ["collatz", "2000"], 3) + _phase("checksum", ["checksum", "profile guided"], 2)
BREADTH = _phase("primes", ["primes", "5000"], 1) + _phase("words", ["words", "a b a"], 1)


def _write(folder: Path, name: str, phases: str, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(WORKLOAD.format(name=name, extra=extra, phases=phases))
    return path


@dataclass(frozen=True)
class Sharded:
    pipeline: Pipeline
    main: Path
    breadth: Path
    output: str
    tool: ProfdataTool  # the merge's llvm-profdata (rustc's LLVM major)

    @property
    def workloads(self) -> str:
        return f"{self.main},{self.breadth}"

    def merge_record(self) -> dict[str, Any]:
        record = json.loads((self.pipeline.work / "report.json").read_text())["merge"]
        assert isinstance(record, dict)
        return record


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> Sharded:
    root = tmp_path_factory.mktemp("shards")
    pipeline = Pipeline(root, "hello")
    main = _write(root / "workloads", "main", MAIN)
    breadth = _write(root / "workloads", "breadth", BREADTH)
    env = {"PGO_WORKLOAD": f"{main},{breadth}", "PGO_WEIGHTS": "main=9,breadth=1"}
    assert_ok(pipeline.nox("instrument", **env))
    assert_ok(pipeline.nox("train", **env))
    output = assert_ok(pipeline.nox("merge", **env))
    record = json.loads((pipeline.work / "report.json").read_text())["merge"]
    return Sharded(pipeline, main, breadth, output, ProfdataTool(Path(record["llvm_profdata"]), "22"))


def _total_count(tool: ProfdataTool, profile: Path) -> int:
    text = subprocess.run([str(tool.path), "show", str(profile)], capture_output=True, text=True, check=True).stdout
    return int(next(line for line in text.splitlines() if line.startswith("Total count:")).split(":")[1])


def test_each_shard_reaches_its_share_of_the_total_count(sharded: Sharded) -> None:
    record = sharded.merge_record()
    shards = {s["name"]: s for s in record["shards"]}
    assert list(shards) == ["main", "breadth"]
    assert shards["main"]["share_asked"] == pytest.approx(0.9)
    assert shards["breadth"]["share_asked"] == pytest.approx(0.1)
    for shard in shards.values():
        assert abs(shard["share_reached"] - shard["share_asked"]) <= TOLERANCE
        # each shard's own total, merged alone
        assert shard["total_count"] == _total_count(sharded.tool, Path(shard["profile"]))
        assert 0 < shard["overlap_with_rest"] < 100
        assert 0 < shard["only_this_shard"] < shard["executed_functions"] <= shard["total_functions"]
    # the merged profile's total is the weighted sum, and each shard's part of it the share reached
    weighted = {name: s["weight"] * s["total_count"] for name, s in shards.items()}
    merged = _total_count(sharded.tool, Path(record["profile"]))
    assert merged == sum(weighted.values())
    assert weighted["breadth"] / merged == pytest.approx(shards["breadth"]["share_reached"])
    log = (sharded.pipeline.work / "logs" / "merge.log").read_text()
    assert f"--weighted-input={shards['main']['weight']},{shards['main']['profile']}" in log
    for name in shards:
        assert (sharded.pipeline.work / "shards" / name / "profraw").is_dir()


def test_the_summary_shows_each_shard_and_the_untrained_functions(sharded: Sharded) -> None:
    record = sharded.merge_record()
    main = record["shards"][0]
    line = next(ln for ln in sharded.output.splitlines() if "shard       main:" in ln)
    assert f"share 90.0 % asked, {100 * main['share_reached']:.2f} % reached (weight {main['weight']})" in line
    assert f"{main['executed_functions']} of {main['total_functions']} functions executed" in line
    assert f"{main['only_this_shard']} by no other shard" in line
    assert "overlap with the rest" in line
    # neither shard runs `fail`'s or the usage's branch of main, nor checksum's cousins: main's crate has functions
    # no shard executed; the largest first, with their size in the instrumented binary
    assert record["unexecuted_main_crate"] >= 0
    largest = record["unexecuted_largest"]
    assert [f["bytes"] for f in largest] == sorted((f["bytes"] for f in largest), reverse=True)
    assert f"unexecuted  {record['unexecuted_main_crate']} functions of the main crate no training executed" in (
        sharded.output
    )


def test_one_workload_gives_the_profile_it_gave_before(sharded: Sharded) -> None:
    """One workload is merged as before shards existed: one llvm-profdata merge of its raw profiles, no weight (then
    its build ids left out); its profile is byte for byte that merge's, and the main shard's own (command counts are
    deterministic)."""
    pipeline = sharded.pipeline
    env = {"PGO_WORKLOAD": str(sharded.main)}
    assert_ok(pipeline.nox("train", **env))
    assert_ok(pipeline.nox("merge", **env))
    log = (pipeline.work / "logs" / "merge.log").read_text()
    assert "--weighted-input" not in log
    assert f"--input-files={pipeline.work / 'logs' / 'merge-inputs.txt'}" in log
    profile = pipeline.work / "hello-pgo.profdata"
    again = pipeline.root / "again.profdata"
    raws = sorted(str(p) for p in (pipeline.work / "profraw").glob("*.profraw"))
    subprocess.run([str(sharded.tool.path), "merge", "--failure-mode=all", "-o", str(again), *raws], check=True)
    # then written again without the raw profiles' build ids, as every merge of the pipeline is (to text and back)
    text = pipeline.root / "again.proftext"
    subprocess.run([str(sharded.tool.path), "merge", "--text", "-o", str(text), str(again)], check=True)
    subprocess.run([str(sharded.tool.path), "merge", "-o", str(again), str(text)], check=True)
    assert profile.read_bytes() == again.read_bytes()
    assert profile.read_bytes() == (pipeline.work / "shards" / "main" / "main.profdata").read_bytes()
    record = sharded.merge_record()
    assert "shards" not in record
    assert record["unexecuted_main_crate"] > 0


@pytest.mark.refuses("shard-executes-nothing")
def test_a_shard_that_executes_nothing_is_refused(sharded: Sharded, tmp_path: Path) -> None:
    """A real profile of this build whose every count is 0 (the main shard's, through llvm-profdata's text form):
    what a shard that runs none of the binary's code would merge into. (Every run of a command workload executes
    the binary's main, so a training cannot make one.)"""
    main = sharded.pipeline.work / "shards" / "main" / "main.profdata"
    text = subprocess.run(
        [str(sharded.tool.path), "merge", "--text", "-o", "-", str(main)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (tmp_path / "empty.proftext").write_text(_counts_zeroed(text))
    empty = tmp_path / "empty.profdata"
    subprocess.run([str(sharded.tool.path), "merge", "-o", str(empty), str(tmp_path / "empty.proftext")], check=True)
    summary = profdata.check_usable(sharded.tool, empty, env=clean_env(), log=tmp_path / "show.log", what="the profile")
    assert summary.total_functions > 0
    with pytest.raises(CheckFailed) as caught:
        refuse_empty_shard("idle", sharded.main, summary)
    line = caught.value.line()
    assert line.startswith(f"the shard idle executed none of its {summary.total_functions} functions ({sharded.main})")
    assert "fix its phases, or drop the shard from PGO_WORKLOAD" in line


@pytest.mark.refuses("shard-below-its-floor")
def test_a_failed_shard_leaves_no_merged_profile(sharded: Sharded) -> None:
    pipeline = sharded.pipeline
    strict = _write(pipeline.root / "strict", "breadth", BREADTH, extra="min_functions = 100000")
    env = {"PGO_WORKLOAD": f"{sharded.main},{strict}"}
    assert_ok(pipeline.nox("train", **env))
    line = assert_refused(pipeline.nox("merge", **env), "shard breadth: the training executed", "fewer than")
    assert f"{strict} min_functions" in line
    assert not (pipeline.work / "hello-pgo.profdata").exists()
    assert not list((pipeline.work / "shards").glob("*/*.profdata"))
    assert not pipeline.store.exists() or not list(pipeline.store.rglob("*.profdata"))
    record = sharded.merge_record()
    assert "failed" in record


@pytest.mark.refuses("shards-not-last-trainings")
def test_merge_refuses_shards_the_last_training_did_not_train(sharded: Sharded) -> None:
    pipeline = sharded.pipeline
    other = _write(pipeline.root / "other", "depth", BREADTH)
    line = assert_refused(pipeline.nox("merge", PGO_WORKLOAD=f"{sharded.main},{other}"))
    assert "are not these (main, depth)" in line


def _counts_zeroed(text: str) -> str:
    """llvm-profdata's text form with every counter value 0 (the lines after ``# Counter Values:``)."""
    out: list[str] = []
    counters = False
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            counters = line.startswith("# Counter Values:")
        elif counters:
            line = "0"
        out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.refuses(
    "shard-named-twice",
    "shard-weight-not-positive-number",
    "shard-weight-names-no-shard",
    "shard-weights-beyond-llvm-profdata-whatever-the-totals",
)
@pytest.mark.parametrize(
    ("weights", "words"),
    [
        ("", "the shard main is named twice"),
        ("main=0", "the weight of 'main': '0' is not above 0"),
        ("depth=1", "a weight for 'depth', which is not a shard"),
        # a subnormal is above 0: before, trained, then a ZeroDivisionError in the merge
        ("main=1e-320", "the weights of breadth (1) and main (1e-320) are 1e+320 times apart"),
    ],
)
def test_the_shards_are_refused_before_anything_is_built(hello: Pipeline, weights: str, words: str) -> None:
    main = _write(hello.root / "w", "main", MAIN)
    breadth = _write(hello.root / "w", "breadth", BREADTH)
    again = main if not weights else breadth
    proc = hello.nox("pgo", PGO_WORKLOAD=f"{main},{again}", PGO_WEIGHTS=weights)
    assert_refused(proc, words)
    assert not hello.work.exists()
    assert not (hello.crate_dir / "target").exists()
