"""``python -m recipes.bench.chart RESULTS.json CHART.png``: the chart of a bench run, CPU time's
(:func:`recipes.bench.cpu_report.write_chart`) or the counts' (:func:`recipes.bench.counts_report.write_chart`),
drawn in the bench session's venv, which has matplotlib."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from recipes.bench import counts_report
from recipes.bench import cpu_report as report
from recipes.errors import BenchError, PgoError
from recipes.inputs import read_json
from recipes.runner import show


def main(argv: Sequence[str]) -> int:
    """Draw the chart of ``argv[1]`` (a results.json) into ``argv[2]``; 2 for a bad command line, 1 for bad
    results."""
    if len(argv) != 3 or argv[0] != "chart":
        show("usage: python -m recipes.bench.chart chart RESULTS.json CHART.png")
        return 2
    try:
        data = read_json(Path(argv[1]), "the bench results", BenchError, "run the bench again")
        if not isinstance(data, dict):
            raise BenchError(f"{argv[1]} is not the results of a bench run (not a JSON object)", "run the bench again")
        measure = counts_report if data.get("measure") == "counts" else report
        measure.write_chart(Path(argv[2]), *measure.from_json(data))
    except PgoError as error:
        show(f"chart: {error.line()}")
        return 1
    show(f"chart: {argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
