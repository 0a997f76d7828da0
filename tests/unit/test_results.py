"""The types of report.json's records (recipes/results.py) fit what the stages write: a real report, captured
from the demo server's pipeline with BOLT (tests/data/report-demo-server-bolt.json), has no key that its
record's type does not declare and no value of another type; a failed or running record fits every stage."""

from __future__ import annotations

import json
import shutil
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

from recipes import report, results

CAPTURED = Path(__file__).resolve().parent.parent / "data" / "report-demo-server-bolt.json"


def _mismatches(value: object, declared: Any, where: str) -> list[str]:
    """Where ``value`` (as read from JSON) does not fit the type ``declared``: an undeclared or missing key, a
    value of another type."""
    origin = get_origin(declared)
    if declared is Any:
        return []
    if is_typeddict(declared):
        if not isinstance(value, dict):
            return [f"{where}: {value!r} is not an object"]
        hints = get_type_hints(declared)
        found = [f"{where}.{key}: not declared in {declared.__name__}" for key in value if key not in hints]
        found += [f"{where}.{key}: missing" for key in sorted(declared.__required_keys__ - set(value))]
        for key, item in value.items():
            if key in hints:
                found += _mismatches(item, hints[key], f"{where}.{key}")
        return found
    if origin in (Union, types.UnionType):
        if any(not _mismatches(value, option, where) for option in get_args(declared)):
            return []
        return [f"{where}: {value!r} is not a {declared}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {value!r} is not a list"]
        (item_type,) = get_args(declared)
        return [m for i, item in enumerate(value) for m in _mismatches(item, item_type, f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {value!r} is not an object"]
        _, item_type = get_args(declared)
        return [m for key, item in value.items() for m in _mismatches(item, item_type, f"{where}.{key}")]
    if origin is Literal:
        return [] if value in get_args(declared) else [f"{where}: {value!r} is not one of {get_args(declared)}"]
    if declared is type(None):
        return [] if value is None else [f"{where}: {value!r} is not null"]
    if declared is float:  # JSON writes 1.0 as 1.0, but a float may be whole
        fits = isinstance(value, int | float) and not isinstance(value, bool)
    elif declared is int:
        fits = isinstance(value, int) and not isinstance(value, bool)
    elif declared in (str, bool):
        fits = isinstance(value, declared)
    else:
        raise AssertionError(f"{where}: the check does not know the type {declared}")
    return [] if fits else [f"{where}: {value!r} is not a {declared.__name__}"]


def test_a_captured_report_fits_the_record_types(tmp_path: Path) -> None:
    shutil.copy(CAPTURED, tmp_path / "report.json")
    full = report.load(tmp_path)
    assert set(full) == {"instrument", "train", "merge", "optimise", "bolt"}
    assert _mismatches(full, results.Report, "report") == []


def test_an_undeclared_key_or_another_type_does_not_fit() -> None:
    captured = json.loads(CAPTURED.read_text())
    captured["optimise"]["binary_sha"] = captured["optimise"].pop("binary_sha256")
    captured["bolt"]["verify"]["phases"][0]["seconds"] = "6.2"
    captured["merge"]["profraw_dropped"] = {"a.profraw": 1}
    captured["plain"] = {"binary": None}
    assert _mismatches(captured, results.Report, "report") == [
        "report.merge.profraw_dropped.a.profraw: 1 is not a str",
        "report.optimise.binary_sha: not declared in OptimiseResult",
        "report.bolt.verify.phases[0].seconds: '6.2' is not a float",
        "report.plain.binary: None is not a str",
    ]
    assert _mismatches({"optimise": [1]}, results.Report, "report") == ["report.optimise: [1] is not an object"]
    assert _mismatches({"tests": {}}, results.Report, "report") == ["report.tests: not declared in Report"]


def test_a_failed_or_running_record_fits_every_stage() -> None:
    for stage, record_type in get_type_hints(results.Report).items():
        for record in ({"failed": "train did not finish", "running": True}, {"failed": "the training ran 0"}):
            assert _mismatches(record, record_type, stage) == [], stage
    assert set(get_type_hints(results.Report)) == set(get_args(results.StageName))
    assert get_args(results.PipelineStage) == report.STAGES


def test_a_key_declared_not_required_may_be_absent() -> None:
    """A command phase has no ``detail`` and a finished record no ``running``: Python 3.11 lists such keys in
    ``__required_keys__`` when annotations are strings, and the check must not take them from there."""
    phase = {"name": "cli/words", "kind": "command", "requests": 4, "done": 4, "status": {"exit_ok": 4}, "seconds": 0.1}
    assert results.mismatch(phase, results.PhaseRecord, "train.phases[0]", complete=True) is None
    assert results.mismatch({"failed": "x"}, results.Failure, "train", complete=False) is None
    del phase["seconds"]
    assert results.mismatch(phase, results.PhaseRecord, "p", complete=True) == "'p.seconds' is missing"
