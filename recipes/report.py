"""``<work>/report.json``: one object per stage that ran, written atomically."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from recipes.errors import MissingInput

STAGES = ("instrument", "train", "merge", "optimise", "test")
#: what a stage's new result makes stale
LATER = {stage: STAGES[i + 1 :] for i, stage in enumerate(STAGES)}


def report_path(work: Path) -> Path:
    return work / "report.json"


def load(work: Path) -> dict[str, Any]:
    path = report_path(work)
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def save(work: Path, report: dict[str, Any]) -> None:
    work.mkdir(parents=True, exist_ok=True)
    path = report_path(work)
    tmp = path.with_name(f".report.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(report, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def record(work: Path, stage: str, result: dict[str, Any]) -> dict[str, Any]:
    """Set ``stage``'s result and drop the results of the stages after it, which it makes stale."""
    report = load(work)
    for later in LATER.get(stage, ()):
        report.pop(later, None)
    report[stage] = result
    save(work, report)
    return report


def require(work: Path, stage: str, needed_by: str) -> dict[str, Any]:
    result = load(work).get(stage)
    if not isinstance(result, dict):
        raise MissingInput(
            f"{needed_by} needs the result of {stage}, and {report_path(work)} has none",
            f"run `nox -s {stage}` first (or `nox -s pgo` for all stages), with the same PGO_OUT",
        )
    return result
