"""The records of report.json (recipes/results.py) are what the stages write: a real report, captured from the demo
server's pipeline with BOLT (tests/data/report-demo-server-bolt.json), loads as each stage's dataclass and is written
back key for key; a missing or mistyped key is one line naming the file, the stage and the key; a failed or running
record loads as a Failed for every stage."""

from __future__ import annotations

import json
import shutil
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, assert_type, get_args

import pytest

from recipes import report, results
from recipes.errors import MissingInput, WorkDirError
from recipes.results import (
    BoltResult,
    Failed,
    InstrumentResult,
    MergeResult,
    OptimiseResult,
    TrainResult,
    WorkloadRun,
    as_json,
    from_json,
)
from tests.conftest import stage_names

CAPTURED = Path(__file__).resolve().parent.parent / "data" / "report-demo-server-bolt.json"


def _captured() -> dict[str, Any]:
    data = json.loads(CAPTURED.read_text())
    assert isinstance(data, dict)
    return data


def test_a_captured_report_loads_as_the_dataclasses_and_is_written_back_key_for_key(tmp_path: Path) -> None:
    shutil.copy(CAPTURED, tmp_path / "report.json")
    full = report.load(tmp_path)
    assert stage_names(full) == {"instrument", "train", "merge", "optimise", "bolt"}
    real = _captured()
    for stage in ("instrument", "train", "merge", "optimise", "bolt"):
        record = full.stage(stage)
        assert record is not None and not isinstance(record, Failed), stage
        assert as_json(record) == real[stage], stage  # no key lost, none added, every value as it was
        assert list(as_json(record)) == list(real[stage]), stage  # in the order the stages write them
    assert isinstance(full.optimise, OptimiseResult) and isinstance(full.optimise.binary, Path)
    assert isinstance(full.optimise.verify, WorkloadRun) and full.optimise.verify.requests > 0
    assert isinstance(full.bolt, BoltResult) and full.bolt.verify.phases == real["bolt"]["verify"]["phases"]
    work = tmp_path / "again"  # written by report.record, the file reads as the captured one
    report.record(work, "instrument", from_json(InstrumentResult, real["instrument"]))
    report.record(work, "train", from_json(TrainResult, real["train"]))
    report.record(work, "merge", from_json(MergeResult, real["merge"]))
    report.record(work, "optimise", from_json(OptimiseResult, real["optimise"]))
    report.record(work, "bolt", from_json(BoltResult, real["bolt"]))
    assert json.loads((work / "report.json").read_text()) == {"schema": report.REPORT_SCHEMA, **real}


def test_require_returns_the_success_type(tmp_path: Path) -> None:
    shutil.copy(CAPTURED, tmp_path / "report.json")
    optimised = report.require(tmp_path, "optimise", "the test")
    assert_type(optimised, OptimiseResult)  # mypy checks this line: no .get, no cast in the readers
    assert_type(report.require(tmp_path, "merge", "the test").profile, Path)
    assert_type(report.require(tmp_path, "instrument", "the test").binary, Path)
    assert_type(report.require(tmp_path, "bolt", "the test").verify, WorkloadRun)
    assert optimised.binary == Path(_captured()["optimise"]["binary"])


@pytest.mark.refuses("stage-record-lacks-key-readers-need-succeeded")
@pytest.mark.parametrize("stage", ["instrument", "train", "merge", "optimise", "bolt"])
def test_each_required_key_missing_is_one_line_naming_the_file_the_stage_and_the_key(
    tmp_path: Path, stage: str
) -> None:
    declared = results.STAGE_TYPES[stage]
    required = [f.name for f in fields(declared) if f.default is MISSING and f.default_factory is MISSING]
    assert required
    path = tmp_path / "report.json"
    for key in required:
        real = _captured()
        del real[stage][key]
        path.write_text(json.dumps(real))
        with pytest.raises(WorkDirError) as caught:
            report.load(tmp_path)
        session = report.SESSION.get(stage, stage)
        assert caught.value.line() == (
            f"{path}: {stage}: '{key}' is missing (run `nox -s {session}` again with the same PGO_OUT, "
            "or remove report.json and run the stages again)"
        )


@pytest.mark.refuses("stage-record-lacks-key-readers-need-succeeded")
def test_a_value_of_another_type_or_a_null_a_success_cannot_have_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    real = _captured()
    real["merge"]["profile"] = 7
    path.write_text(json.dumps(real))
    with pytest.raises(WorkDirError, match=r"report\.json: merge: 'profile' is the number 7, not a string \(run"):
        report.load(tmp_path)
    real = _captured()
    real["optimise"]["binary"] = None  # a failed record's, when no copy could be kept: not a success's
    path.write_text(json.dumps(real))
    with pytest.raises(WorkDirError, match=r"report\.json: optimise: 'binary' is null, not a string \(run"):
        report.load(tmp_path)
    real = _captured()
    real["bolt"]["verify"]["workload"] = ["x"]
    path.write_text(json.dumps(real))
    with pytest.raises(WorkDirError, match=r"bolt: 'verify\.workload' is a list, not a string \(run `nox -s bolt`"):
        report.load(tmp_path)


def test_a_failed_or_running_record_loads_as_failed_for_every_stage(tmp_path: Path) -> None:
    for stage in results.STAGE_TYPES:
        for record in ({"failed": f"{stage} did not finish", "running": True}, {"failed": "the training ran 0"}):
            parsed = report.parse(tmp_path / "report.json", {stage: record})
            loaded = getattr(parsed, stage)
            assert loaded == Failed(str(record["failed"]), "running" in record), stage
            assert loaded.as_json() == record, stage
    failed_optimise = {"store_path": "/s/a.profdata", "binary": None, "failed": "stale", "seconds": 2.5}
    parsed = report.parse(tmp_path / "report.json", {"optimise": failed_optimise})
    assert parsed.optimise == Failed("stale", partial={"store_path": "/s/a.profdata", "binary": None, "seconds": 2.5})
    with pytest.raises(WorkDirError, match=r"optimise: 'seconds' is the string '2', not a number"):
        report.parse(tmp_path / "report.json", {"optimise": {**failed_optimise, "seconds": "2"}})
    (tmp_path / "report.json").write_text(json.dumps({"optimise": failed_optimise}))
    with pytest.raises(MissingInput, match="the last optimise failed: stale"):
        report.require(tmp_path, "optimise", "bolt")
    assert set(results.STAGE_TYPES) == set(get_args(results.StageName))
    assert {f.name for f in fields(results.Report)} == set(get_args(results.StageName))
    assert get_args(results.PipelineStage) == report.STAGES


def test_a_key_declared_not_required_may_be_absent() -> None:
    """A command phase has no ``detail`` and a finished record no ``running``: Python 3.11 lists such keys in
    ``__required_keys__`` when annotations are strings, and the check must not take them from there."""
    phase = {"name": "cli/words", "kind": "command", "requests": 4, "done": 4, "status": {"exit_ok": 4}, "seconds": 0.1}
    assert results.mismatch(phase, results.PhaseRecord, "train.phases[0]", complete=True) is None
    del phase["seconds"]
    assert results.mismatch(phase, results.PhaseRecord, "p", complete=True) == "'p.seconds' is missing"


def test_a_cpu_baseline_record_is_written_and_read_back_and_an_older_one_without_its_arch_loads(
    tmp_path: Path,
) -> None:
    checked = results.CpuBaselineResult(
        binary=Path("/w/hello-pgo"),
        qemu="qemu-x86_64 version 7.2.22",
        cpu="qemu64,-pni",
        arch="x86_64",
        qemu_program="qemu-x86_64",
        controls={"sse3": {"baseline": "killed by SIGILL (illegal instruction)", "max": "exit code 0"}},
        command={"args": ["primes", "100"], "exit": "exit code 0"},
        binary_sha256="ab" * 32,
    )
    report.record(tmp_path, "cpu_baseline", checked)
    written = json.loads((tmp_path / "report.json").read_text())["cpu_baseline"]
    assert list(written) == ["binary", "qemu", "cpu", "arch", "qemu_program", "controls", "command", "binary_sha256"]
    assert report.load(tmp_path).cpu_baseline == checked
    del written["arch"], written["qemu_program"]  # written before the arch was recorded
    parsed = report.parse(tmp_path / "report.json", {"cpu_baseline": written})
    assert isinstance(parsed.cpu_baseline, results.CpuBaselineResult) and parsed.cpu_baseline.arch is None
    del written["controls"]
    with pytest.raises(WorkDirError, match=r"cpu_baseline: 'controls' is missing \(run `nox -s cpu-baseline` again"):
        report.parse(tmp_path / "report.json", {"cpu_baseline": written})
