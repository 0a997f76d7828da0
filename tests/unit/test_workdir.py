"""The work dir's paths are named in recipes/workdir.py alone: WorkDir and BenchDir, and the rule (parsed from
recipes/ with ``ast``) that nothing else composes a path under the work dir."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from recipes.workdir import BenchDir, WorkDir

RECIPES = Path(__file__).resolve().parents[2] / "recipes"

#: the names that hold the work dir (or the bench's folder under it): ``plan.work``, ``config.out``,
#: ``settings.out``, a parameter ``work``
WORK_NAMES = {"work", "out"}
#: WorkDir's and BenchDir's own attribute of the root, reached through these names
ROOT_HOLDERS = {"workdir", "bench", "out"}


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def is_work_dir(node: ast.expr) -> bool:
    """Whether ``node`` names the work dir itself: ``work``, ``plan.work``, ``config.out``, ``self.out``,
    ``plan.workdir.root``."""
    if _name(node) in WORK_NAMES:
        return True
    return isinstance(node, ast.Attribute) and node.attr == "root" and _name(node.value) in ROOT_HOLDERS


def compositions(source: str) -> list[tuple[int, str]]:
    """The ``<work dir> / ...`` expressions of ``source``: their lines and their text."""
    tree = ast.parse(source)
    return [
        (node.lineno, ast.unparse(node))
        for node in ast.walk(tree)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and is_work_dir(node.left)
    ]


def _relative(path: Path) -> str:
    return path.relative_to(RECIPES).as_posix()


def test_no_path_is_composed_under_the_work_dir_outside_workdir_py() -> None:
    found = [
        f"recipes/{_relative(path)}:{line}: {text}"
        for path in sorted(RECIPES.rglob("*.py"))
        if _relative(path) != "workdir.py"
        for line, text in compositions(path.read_text(encoding="utf-8"))
    ]
    assert not found, "name these paths in recipes/workdir.py (WorkDir, BenchDir):\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        'plan.work / "bin"',
        'config.out / "bench"',
        'self.plan.work / "bolt"',
        "work / (name or 'train')",
        "f\"{work / 'report.json'} names\"",
        'plan.workdir.root / "x"',
        'settings.out / "runs" / name',
    ],
)
def test_the_rule_finds_a_composition(source: str) -> None:
    assert compositions(source)


@pytest.mark.parametrize(
    "source", ['plan.workdir.rejected("x")', 'plan.logs / "merge.log"', 'folder / "server.toml"', 'repo.root / "x"']
)
def test_the_rule_leaves_what_is_not_the_work_dir(source: str) -> None:
    assert not compositions(source)


def test_the_pipeline_paths(tmp_path: Path) -> None:
    work = WorkDir(tmp_path)
    assert work.report == tmp_path / "report.json"
    assert work.logs == tmp_path / "logs"
    assert work.bin == tmp_path / "bin"
    assert work.profraw == tmp_path / "profraw"
    assert work.generate_target == tmp_path / "generate-target"
    assert work.profdata("hello-pgo") == tmp_path / "hello-pgo.profdata"
    assert work.scratch("bolt-train") == tmp_path / "bolt-train"
    assert work.checked("optimise", "hello-pgo") == tmp_path / "optimised" / "hello-pgo"
    assert work.checked("bolt", "hello-pgo") == tmp_path / "bolted" / "hello-pgo"
    assert work.rejected("hello-pgo") == tmp_path / "rejected" / "hello-pgo"
    assert work.bolt == tmp_path / "bolt"
    assert work.test_target == tmp_path / "test-target"
    assert work.plain_target == tmp_path / "plain-target"
    assert work.variant_target("lto-fat") == tmp_path / "variant-target" / "lto-fat"
    with pytest.raises(KeyError):
        work.checked("merge", "hello-pgo")


def test_the_release_paths(tmp_path: Path) -> None:
    work = WorkDir(tmp_path)
    assert work.cpu_baseline() == tmp_path / "cpu-baseline"
    assert work.cpu_baseline("pgo-bolt") == tmp_path / "cpu-baseline" / "pgo-bolt"
    assert work.release("v1.0.0") == tmp_path / "release" / "v1.0.0"
    assert work.rebuild("v1.0.0") == tmp_path / "rebuild" / "v1.0.0"
    assert work.determinism() == tmp_path / "determinism"
    assert work.determinism("first") == tmp_path / "determinism" / "first"
    assert work.determinism_profile == tmp_path / "determinism" / "profile.profdata"
    assert work.for_target("x86_64-unknown-linux-musl") == tmp_path / "x86_64-unknown-linux-musl"
    assert work.stripped("hello") == tmp_path / "stripped" / "hello"
    assert work.stripped_bolt("hello") == tmp_path / "stripped-bolt" / "hello"
    assert work.published("hello") == tmp_path / "published" / "hello"
    assert work.published_bolt("hello") == tmp_path / "published-bolt" / "hello"
    assert work.artefact("hello-v1.tar.gz") == tmp_path / "hello-v1.tar.gz"


def test_the_bench_paths(tmp_path: Path) -> None:
    bench = WorkDir(tmp_path).bench
    assert bench == BenchDir(tmp_path / "bench")
    assert bench.bin == tmp_path / "bench" / "bin"
    assert bench.run("cached") == tmp_path / "bench" / "runs" / "cached"
    assert bench.runs == tmp_path / "bench" / "runs"
    assert (bench.results_json, bench.results_md, bench.chart) == (
        tmp_path / "bench" / "results.json",
        tmp_path / "bench" / "results.md",
        tmp_path / "bench" / "chart.png",
    )
    assert (bench.coverage, bench.logs, bench.setup, bench.sigterm) == (
        tmp_path / "bench" / "coverage",
        tmp_path / "bench" / "logs",
        tmp_path / "bench" / "setup",
        tmp_path / "bench" / "sigterm",
    )


def test_a_work_dir_is_frozen(tmp_path: Path) -> None:
    with pytest.raises(AttributeError):
        WorkDir(tmp_path).root = tmp_path / "other"  # type: ignore[misc]
