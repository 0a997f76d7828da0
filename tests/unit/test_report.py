"""report.json tells the truth: a started stage replaces its record and the later ones with a failure."""

from __future__ import annotations

import contextlib
import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from recipes import report
from recipes.errors import MissingInput, PgoError, WorkDirError
from recipes.files import copy_atomically
from recipes.release import cpu
from recipes.results import (
    Failed,
    InstrumentResult,
    MergeResult,
    OptimiseResult,
    PhaseRecord,
    Report,
    TrainResult,
    WorkloadRun,
    as_json,
    from_json,
)
from recipes.stages import summary
from recipes.stages.summary import summary_lines
from tests.conftest import DATA, stage_names
from tests.faults import small_tmpfs
from tests.hostile import garbage, mutations

#: a real report, captured from the demo server's pipeline with BOLT
CAPTURED = Path(__file__).resolve().parent.parent / "data" / "report-demo-server-bolt.json"


def _captured() -> dict[str, Any]:
    data = json.loads(CAPTURED.read_text())
    assert isinstance(data, dict)
    return data


def test_a_started_stage_drops_its_old_success_and_the_later_stages(tmp_path: Path) -> None:
    real = _captured()
    report.record(tmp_path, "instrument", from_json(InstrumentResult, real["instrument"]))
    report.record(tmp_path, "train", from_json(TrainResult, real["train"]))
    report.record(tmp_path, "merge", from_json(MergeResult, real["merge"]))
    report.record(tmp_path, "optimise", from_json(OptimiseResult, real["optimise"]))
    report.start(tmp_path, "train")
    full = report.load(tmp_path)
    assert stage_names(full) == {"instrument", "train"}
    assert isinstance(full.instrument, InstrumentResult) and as_json(full.instrument) == real["instrument"]
    assert isinstance(full.train, Failed) and full.train.running
    assert "did not finish" in full.train.reason


@pytest.mark.refuses("stage-before-failed")
def test_require_refuses_a_failed_stage(tmp_path: Path) -> None:
    report.record_failure(tmp_path, "merge", Failed("the training executed 0 of 56 functions"))
    with pytest.raises(MissingInput, match="the last merge failed: the training executed 0 of 56"):
        report.require(tmp_path, "merge", "optimise")


def test_a_result_handed_on_in_memory_is_taken_as_it_is_and_report_json_read_without_one(tmp_path: Path) -> None:
    """``nox -s pgo`` hands each stage's result to the next (require's ``handed``); a stage run alone, or handed a
    failure or nothing of that stage, reads report.json."""
    real = from_json(MergeResult, _captured()["merge"])
    on_disk = replace(real, executed_functions=1)
    report.record(tmp_path, "merge", on_disk)
    assert report.require(tmp_path, "merge", "optimise", Report(merge=real)) is real
    assert report.require(tmp_path, "merge", "optimise").executed_functions == 1
    failed = Report(merge=Failed("it failed"))
    assert report.require(tmp_path, "merge", "optimise", failed).executed_functions == 1
    with pytest.raises(MissingInput, match="optimise needs the result of instrument"):
        report.require(tmp_path, "instrument", "optimise", Report(merge=real))


@pytest.mark.refuses("report-json-not-valid-json")
def test_a_corrupt_report_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text('{"instrument": ')
    with pytest.raises(WorkDirError, match=r"report\.json is not valid JSON"):
        report.load(tmp_path)


@pytest.mark.refuses("report-json-not-object", "report-json-another-schema", "stage-record-not-object")
def test_the_report_carries_its_schema_and_another_is_refused(tmp_path: Path) -> None:
    instrument = _captured()["instrument"]
    report.record(tmp_path, "instrument", from_json(InstrumentResult, instrument))
    text = (tmp_path / "report.json").read_text()
    assert text.startswith('{\n  "schema": 1,\n  "instrument"')
    expected = Report(instrument=from_json(InstrumentResult, instrument))
    assert report.load(tmp_path) == expected  # the schema is not a stage
    (tmp_path / "report.json").write_text(json.dumps({"instrument": instrument}))  # written before the schema was
    assert report.load(tmp_path) == expected
    (tmp_path / "report.json").write_text('{"schema": 2, "instrument": {}}')
    with pytest.raises(WorkDirError, match=r"report\.json has schema 2; this pgo-recipes reads schema 1"):
        report.load(tmp_path)
    (tmp_path / "report.json").write_text('{"instrument": [1]}')
    with pytest.raises(WorkDirError, match="'instrument' is not a stage record"):
        report.load(tmp_path)
    (tmp_path / "report.json").write_text("[]")
    with pytest.raises(WorkDirError, match="is not a report"):
        report.load(tmp_path)


@pytest.mark.refuses("report-json-cannot-written")
def test_a_report_that_cannot_be_written_refused(tmp_path: Path) -> None:
    """The work dir on a read-only filesystem: the report is not written, and nothing half-written is left."""
    with small_tmpfs(tmp_path / "ro", read_only=True) as work:
        with pytest.raises(WorkDirError, match=rf"cannot write {work / 'report.json'}: Read-only file system \(free"):
            report.record(work, "instrument", from_json(InstrumentResult, _captured()["instrument"]))
        assert list(work.iterdir()) == []


@pytest.mark.refuses("checked-copy-cannot-written")
def test_a_checked_copy_that_cannot_be_written_refused(tmp_path: Path) -> None:
    """optimise's copy of the checked binary into a work dir on a read-only filesystem: one line, nothing left."""
    binary = tmp_path / "hello-pgo"
    binary.write_bytes(b"\x7fELF the checked binary")
    with small_tmpfs(tmp_path / "ro", read_only=True) as work:
        dest = work / "optimised" / "hello-pgo"
        with pytest.raises(WorkDirError, match=rf"cannot copy {binary} to {dest}: Read-only file system \(free space"):
            copy_atomically(binary, dest)
        assert list(work.iterdir()) == []


def _write(work: Path, data: object) -> None:
    (work / "report.json").write_text(json.dumps(data))


@pytest.mark.refuses("stage-record-lacks-key-readers-need-succeeded")
def test_a_record_without_a_key_its_readers_need_is_one_line_naming_the_stage_and_the_key(tmp_path: Path) -> None:
    real = _captured()
    del real["optimise"]["binary"]
    _write(tmp_path, real)
    path = tmp_path / "report.json"
    with pytest.raises(WorkDirError) as caught:
        report.load(tmp_path)
    assert caught.value.line() == (
        f"{path}: optimise: 'binary' is missing (run `nox -s optimise` again with the same PGO_OUT, "
        "or remove report.json and run the stages again)"
    )
    real = _captured()
    del real["train"]["profraw"]
    _write(tmp_path, real)
    with pytest.raises(WorkDirError, match=r"report\.json: train: 'profraw' is missing \(run `nox -s train` again"):
        report.require(tmp_path, "train", "merge")
    real = _captured()
    del real["optimise"]["verify"]["requests"]
    _write(tmp_path, {"optimise": real["optimise"], "test": {"seconds": 1.0, "passed": 1, "failed": 0}})
    with pytest.raises(WorkDirError, match=r"report\.json: optimise: 'verify\.requests' is missing"):
        report.load(tmp_path)
    del real["optimise"]["verify"]
    _write(tmp_path, {"optimise": real["optimise"], "test": {"seconds": 1.0, "passed": 1, "failed": 0}})
    with pytest.raises(WorkDirError, match=r"report\.json: test: 'ignored' is missing \(run `nox -s pgo-test` again"):
        report.load(tmp_path)


@pytest.mark.refuses("stage-record-lacks-key-readers-need-succeeded")
def test_a_value_of_another_type_is_one_line_naming_where_it_is(tmp_path: Path) -> None:
    real = _captured()
    real["optimise"]["binary"] = 3
    real["bolt"]["dyno_stats"]["before"]["taken branches"] = "many"
    _write(tmp_path, real)
    with pytest.raises(WorkDirError, match=r": optimise: 'binary' is the number 3, not a string or null \(run"):
        report.load(tmp_path)
    real["optimise"]["binary"] = "/x"
    real["train"]["phases"][0]["seconds"] = True
    _write(tmp_path, real)
    with pytest.raises(WorkDirError, match=r": train: 'phases\[0\]\.seconds' is the boolean true, not a number"):
        report.load(tmp_path)
    real["train"]["phases"][0]["seconds"] = 3  # a whole number of seconds is a number
    _write(tmp_path, real)
    with pytest.raises(WorkDirError, match=r"bolt: 'dyno_stats\.before\.taken branches' is the string 'many', not an"):
        report.load(tmp_path)
    real["bolt"]["dyno_stats"]["before"]["taken branches"] = 12
    real["bolt"]["failed"] = 1
    _write(tmp_path, real)
    with pytest.raises(WorkDirError, match=r"bolt: 'failed' is the number 1, not a string \(run `nox -s bolt` again"):
        report.load(tmp_path)


def test_failed_running_and_unknown_records_load_with_what_they_have(tmp_path: Path) -> None:
    """A failed or running record has only what the stage had by then; a test record's ``failed`` may be its
    count of failed tests (then it is a whole record); a record of a name this version does not write is left be."""
    real = _captured()
    failed_optimise = {"failed": "the optimised binary failed its checks", "binary": None, "seconds": 2.5}
    records = {
        "instrument": real["instrument"],
        "train": {"failed": "train did not finish (started 2026-01-01T00:00:00+0000)", "running": True},
        "optimise": failed_optimise,
        "test": {"failed": "cargo test did not compile"},
        "someday": [1],
    }
    _write(tmp_path, records)
    with pytest.raises(WorkDirError, match="'someday' is not a stage record"):
        report.load(tmp_path)
    records["someday"] = {"x": 1}
    _write(tmp_path, records)
    full = report.load(tmp_path)
    assert isinstance(full.optimise, Failed) and full.optimise.as_json() == failed_optimise
    assert isinstance(full.train, Failed) and full.train.running is True
    with pytest.raises(MissingInput, match="the last train failed: train did not finish"):
        report.require(tmp_path, "train", "merge")
    assert summary_lines(full)[:3] == [
        "train       failed: train did not finish (started 2026-01-01T00:00:00+0000)",
        "optimise    failed: the optimised binary failed its checks",
        "test        failed: cargo test did not compile",
    ]
    _write(tmp_path, {"test": {"seconds": 9.0, "passed": 3, "failed": 2, "ignored": 0}})  # 2 failed tests
    assert summary_lines(report.load(tmp_path))[-1].startswith("test             9.0 s  3 passed, 2 failed")
    _write(tmp_path, {"test": {"seconds": 9.0, "passed": 3, "failed": 2}})
    with pytest.raises(WorkDirError, match="test: 'ignored' is missing"):
        report.load(tmp_path)
    _write(tmp_path, {"plain": {}})  # a record without ``failed`` is a success: it has every key of one
    with pytest.raises(WorkDirError, match=r"plain: 'binary' is missing \(run `nox -s plain` again"):
        report.load(tmp_path)


def _read_as_the_stages_do(work: Path) -> None:
    """load, then what the stages, the summary and cpu-baseline read of it: a PgoError or nothing."""
    try:
        full = report.load(work)
    except PgoError:
        return
    summary_lines(full)
    for stage in ("instrument", "train", "merge", "optimise"):
        with contextlib.suppress(MissingInput):
            report.require(work, stage, "the next stage")
    with contextlib.suppress(PgoError):
        cpu.default_binary(full, work)


@pytest.mark.refuses("stage-record-lacks-key-readers-need-succeeded")
def test_every_key_deleted_or_of_another_type_is_a_pgo_error_or_a_report_that_reads(tmp_path: Path) -> None:
    """The captured report, each key of each record at every level deleted or given a value of every other type:
    load() refuses it in one line or returns a report its readers read without an exception. The lists keep two
    items each (62 phases are alike, and the changes touch the first)."""
    real = _captured()
    for record in (real["train"], real["optimise"]["verify"], real["bolt"]["train"], real["bolt"]["verify"]):
        del record["phases"][2:]
    refused = 0
    for what, changed in mutations(real):
        _write(tmp_path, changed)
        try:
            report.load(tmp_path)
        except PgoError as error:
            assert "\n" not in error.line(), what
            refused += 1
            continue
        _read_as_the_stages_do(tmp_path)
    assert refused > 1000  # most changes are refused: the check is not one that lets everything through


@pytest.mark.refuses("report-json-not-utf-8-text")
def test_garbage_bytes_and_truncations_are_a_pgo_error(tmp_path: Path) -> None:
    real = CAPTURED.read_bytes()
    for data in garbage(real, random.Random(19), 300):
        (tmp_path / "report.json").write_bytes(data)
        _read_as_the_stages_do(tmp_path)
    (tmp_path / "report.json").write_bytes(real.replace(b"hello", b"h\xe9llo", 1).replace(b"demo", b"d\xe9mo", 1))
    with pytest.raises(WorkDirError, match=r"report\.json is not UTF-8 text \(byte 0xe9 on line"):
        report.load(tmp_path)


def test_the_summary_says_assembled_c_objects_are_not_judged(tmp_path: Path) -> None:
    # ring's .S objects name no compiler in .comment: report.json says "unknown", the summary says what they are
    real = _captured()
    optimise = dict(real["optimise"])
    optimise["c_code"] = {
        "setting": "auto",
        "languages": {
            "C": {"compiler": ["/usr/bin/clang-22"], "version": "22.1.8", "profiled": True, "off": None},
            "C++": {"compiler": ["/usr/bin/clang++-22"], "version": "22.1.8", "profiled": True, "off": None},
        },
        "crates": [
            {
                "crate": "ring",
                "objects": 30,
                "compilers": ["Debian clang version 22.1.8 (1~deb12u1)", "unknown"],
                "profile_flags": True,
                "functions_with_profile": ["fe_add", "fe_mul_impl"],
                "functions_without_profile": ["bssl_constant_time_test_main"],
                "stale": [],
                "missing": [],
            }
        ],
    }
    _write(tmp_path, {"optimise": optimise})
    line = next(x for x in summary_lines(report.load(tmp_path)) if x.startswith("c code"))
    assert line == (
        "c code      ring: 2 C/C++ functions with profile data, 1 without "
        "(Debian clang version 22.1.8 (1~deb12u1), assembly, not judged)"
    )
    # by language (the build's log said which compiled what): the assembled objects are not "assembly by assembly"
    optimise["c_code"]["crates"][0]["languages"] = {
        "C": ["Debian clang version 22.1.8 (1~deb12u1)"],
        "assembly": ["unknown"],
    }
    _write(tmp_path, {"optimise": optimise})
    line = next(x for x in summary_lines(report.load(tmp_path)) if x.startswith("c code"))
    assert line.endswith("(C by Debian clang version 22.1.8 (1~deb12u1); assembly, not judged)"), line


def test_the_summary_counts_runs_and_requests_in_their_own_words() -> None:
    """A command workload runs, a server's phases send requests: the train and verify lines say which."""
    real = _captured()
    lines = summary_lines(report.parse(CAPTURED, real))
    (train,) = [line for line in lines if line.startswith("train ")]
    assert f"{sum(p['requests'] for p in real['train']['phases']):,} requests in 62 phases" in train, train
    assert "requests/runs" not in "\n".join(lines) and " runs" not in train
    (coverage,) = [line for line in lines if line.startswith("coverage ")]
    assert "functions of the main crate with a profile record (executed or not)" in coverage, coverage
    assert any("functions executed (non-zero counts; floor" in line for line in lines)
    phase: PhaseRecord = {"name": "a", "kind": "command", "requests": 12, "done": 12, "status": {}, "seconds": 1.0}
    command = WorkloadRun(seconds=1.0, requests=12, phases=[phase], scale=1.0, workload=Path("w.toml"))
    assert summary.counted(command) == "12 runs"
    both = replace(command, phases=[phase, {**phase, "kind": "http", "requests": 1}])
    assert summary.counted(both) == "1 request and 12 runs"
    assert summary.counted(replace(command, requests=5, phases=[])) == "5 requests or runs"


def _c_code(profiled: bool, off: str | None) -> dict[str, Any]:
    language = {"compiler": ["clang-22"] if profiled else None, "version": None, "profiled": profiled, "off": off}
    crate = {"crate": "ring", "objects": 30, "compilers": ["GCC: (Debian 12.2.0-14) 12.2.0"], "profile_flags": False}
    return {"setting": "auto", "languages": {"C": language, "C++": language}, "crates": [crate]}


def test_the_c_code_line_says_why_a_crates_c_is_unprofiled() -> None:
    """A cross target's C, which the plan leaves alone on purpose, is not "the profile flags did not reach it" (the
    summary of the demo server for aarch64 said so): the plan's reason is given; a C the plan profiles and the
    flags missed still says they did not reach it."""
    full = json.loads((DATA / "report-demo-server-bolt.json").read_text())
    path = DATA / "report-demo-server-bolt.json"
    cross = "aarch64-unknown-linux-gnu is not the host: set PGO_C=1 to compile its C with clang 22 --target"
    full["optimise"]["c_code"] = _c_code(profiled=False, off=cross)
    (line,) = [line for line in summary_lines(report.parse(path, full)) if line.startswith("c code")]
    assert line.endswith(f"(GCC: (Debian 12.2.0-14) 12.2.0); not profiled: {cross}")
    full["optimise"]["c_code"] = _c_code(profiled=True, off=None)
    (line,) = [line for line in summary_lines(report.parse(path, full)) if line.startswith("c code")]
    assert line.endswith("; the profile flags did not reach it")
