"""Shards (recipes/workload/shards.py, recipes/config.py): the configuration's list of workloads and its weights,
and the arithmetic of the integer weights of ``llvm-profdata merge --weighted-input``."""

from __future__ import annotations

from pathlib import Path

import pytest

from recipes import train
from recipes.config import load_config, shard_name
from recipes.errors import ConfigError
from recipes.llvm.profdata import parse_record_counts, parse_show
from recipes.results import MergeResult, from_json
from recipes.stages.summary import shard_summary_lines
from recipes.workload.shards import (
    MAX_APART,
    MAX_MULTIPLIER,
    MAX_TOTAL,
    MAX_WEIGHT,
    TOLERANCE,
    Shard,
    asked_shares,
    integer_weights,
    plan_shards,
    reached_shares,
    refuse_far_apart,
    refuse_heavy,
    weighted_inputs,
)

_ = train  # imported for its registrations: the phase kinds a workload file names
DATA = Path(__file__).resolve().parents[1] / "data"


def _project(tmp_path: Path, table: str = "") -> Path:
    (tmp_path / "pyproject.toml").write_text(f"[tool.pgo]\n{table}\n")
    return tmp_path


def test_one_workload_has_no_shards(tmp_path: Path) -> None:
    config = load_config(_project(tmp_path), {"PGO_WORKLOAD": "hello"})
    assert (config.workload, config.shards, config.weights) == ("hello", (), ())


def test_a_list_of_one_is_one_workload(tmp_path: Path) -> None:
    config = load_config(_project(tmp_path, 'workload = ["hello"]'), {})
    assert (config.workload, config.shards) == ("hello", ())


def test_shards_and_weights_from_pyproject(tmp_path: Path) -> None:
    table = 'workload = ["main", "extra/breadth.toml"]\nweights = { main = 9, breadth = 1 }'
    config = load_config(_project(tmp_path, table), {})
    assert config.workload == "main"  # what the stages that run one workload take: the first shard
    assert config.shards == ("main", "extra/breadth.toml")
    assert config.weights == (("main", 9.0), ("breadth", 1.0))


def test_shards_and_weights_from_the_environment(tmp_path: Path) -> None:
    env = {"PGO_WORKLOAD": "main, breadth", "PGO_WEIGHTS": "main=2.5"}
    config = load_config(_project(tmp_path, 'workload = ["x", "y"]'), env)
    assert config.shards == ("main", "breadth")
    assert config.weights == (("main", 2.5),)  # breadth: 1


def test_a_shard_is_named_by_its_stem() -> None:
    assert [shard_name(w) for w in ("main", "a/b/breadth.toml", "/x/y.toml")] == ["main", "breadth", "y"]


@pytest.mark.refuses("shard-named-twice")
@pytest.mark.parametrize(
    ("workloads", "words"),
    [("main,main", "(main and main)"), ("main,other/main.toml", "(main and other/main.toml)")],
)
def test_a_shard_named_twice_is_refused(tmp_path: Path, workloads: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(_project(tmp_path), {"PGO_WORKLOAD": workloads})
    assert caught.value.line().startswith(f"PGO_WORKLOAD: the shard main is named twice {words}")
    assert "workload file's stem" in caught.value.line()


@pytest.mark.refuses("shard-weight-not-positive-number")
@pytest.mark.parametrize(
    ("weights", "problem"),
    [
        ("main=0", "'0' is not above 0"),
        ("main=-3", "'-3' is not above 0"),
        ("main=lots", "'lots' is not a number"),
        ("main=nan", "'nan' is not a finite number"),
        ("main", "'main' is not name=weight"),
    ],
)
def test_a_weight_that_is_not_a_positive_number_is_refused(tmp_path: Path, weights: str, problem: str) -> None:
    env = {"PGO_WORKLOAD": "main,breadth", "PGO_WEIGHTS": weights}
    with pytest.raises(ConfigError) as caught:
        load_config(_project(tmp_path), env)
    assert caught.value.line().startswith(f"PGO_WEIGHTS: the weight of 'main': {problem}: expected a number above 0")
    assert "PGO_WEIGHTS=main=9,breadth=1" in caught.value.line()


@pytest.mark.refuses("shard-weight-not-positive-number")
def test_a_weight_in_pyproject_that_is_not_positive_is_refused(tmp_path: Path) -> None:
    table = 'workload = ["main", "breadth"]\nweights = { main = -1 }'
    with pytest.raises(ConfigError, match=r"\[tool.pgo\] weights: the weight of 'main': '-1' is not above 0"):
        load_config(_project(tmp_path, table), {})


@pytest.mark.refuses("shard-weight-names-no-shard")
def test_a_weight_for_a_shard_not_named_is_refused(tmp_path: Path) -> None:
    env = {"PGO_WORKLOAD": "main,breadth", "PGO_WEIGHTS": "main=9,depth=1"}
    with pytest.raises(ConfigError) as caught:
        load_config(_project(tmp_path), env)
    line = caught.value.line()
    assert line.startswith("PGO_WEIGHTS: a weight for 'depth', which is not a shard (the shards: main, breadth)")


@pytest.mark.refuses("shard-weight-names-no-shard")
def test_weights_without_a_workload_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="PGO_WEIGHTS: weights without shards: no workload is given"):
        load_config(_project(tmp_path), {"PGO_WEIGHTS": "main=1"})


def test_asked_shares_are_the_weights_normalised() -> None:
    assert asked_shares([9, 1]) == [0.9, 0.1]
    assert asked_shares([1.0, 1.0, 2.0]) == [0.25, 0.25, 0.5]


def test_equal_shares_of_equal_totals_weigh_one() -> None:
    assert integer_weights([0.5, 0.5], [1000, 1000]) == [1, 1]
    assert integer_weights([1.0], [123]) == [1]


def test_weights_normalise_by_each_shards_total() -> None:
    # a long shard (10,000 counts) and a short one (100): equal shares need the short one weighed 100 times
    assert integer_weights([0.5, 0.5], [10_000, 100]) == [1, 100]
    # 9:1 asked; the totals 300 and 100: (0.9/300) : (0.1/100) = 3 : 1
    weights = integer_weights([0.9, 0.1], [300, 100])
    assert weights == [3, 1]
    assert reached_shares(weights, [300, 100]) == [0.9, 0.1]


def test_the_rounding_takes_the_first_multiplier_within_the_tolerance() -> None:
    totals = [7_919, 104_729, 1_299_709]  # primes: no small multiplier divides them evenly
    shares = asked_shares([5, 3, 2])
    weights = integer_weights(shares, totals)
    reached = reached_shares(weights, totals)
    assert max(abs(a - b) for a, b in zip(reached, shares, strict=True)) <= TOLERANCE
    assert min(weights) <= MAX_MULTIPLIER
    assert all(isinstance(w, int) and w >= 1 for w in weights)


def test_a_tiny_share_is_reached_with_a_weight_of_one() -> None:
    # a share of one in a billion: the shard weighs 1 and the other a billion times more
    weights = integer_weights([1e-9, 1 - 1e-9], [1, 1])
    assert weights[0] == 1
    assert weights[1] == round(weights[1])
    assert reached_shares(weights, [1, 1])[0] < 0.01


def test_a_total_of_zero_has_no_weights() -> None:
    with pytest.raises(ValueError, match="total count above 0"):
        integer_weights([0.5, 0.5], [10, 0])


def test_weighted_inputs() -> None:
    assert weighted_inputs([3, 1], [Path("/w/a.profdata"), Path("/w/b.profdata")]) == [
        "--weighted-input=3,/w/a.profdata",
        "--weighted-input=1,/w/b.profdata",
    ]


def test_the_total_count_of_llvm_profdata_show() -> None:
    summary = parse_show((DATA / "profdata-show.txt").read_text())
    assert (summary.total_functions, summary.executed_functions, summary.total_count) == (56, 49, 1338279)
    assert parse_show("Total functions: 3\n").total_count == 0  # an llvm-profdata that prints none


def test_record_counts_add_each_records_counters_up() -> None:
    counts = parse_record_counts((DATA / "profdata-show-counts.txt").read_text())
    local = "hello_pgo.9e151ce622a56ce3-cgu.3;_ZN3std3sys9backtrace28__rust_begin_short_backtrace17h35817479f1376c01E"
    assert counts[local] == 40  # a local function keeps its codegen unit: one record per unit
    assert counts["_ZN5alloc7raw_vec20RawVecInner$LT$A$GT$15try_allocate_in17h49c110631acdfc6bE"] == 80
    assert len(counts) == 8
    assert sum(1 for c in counts.values() if c) == 5


def _merge_record(**extra: object) -> dict[str, object]:
    return {
        "profile": "/w/hello-pgo.profdata",
        "profraw_merged": 7,
        "profraw_dropped": {},
        "min_functions": 1,
        "min_functions_set": 1,
        "min_functions_source": "the default",
        "min_functions_total": None,
        "llvm_profdata": "/usr/bin/llvm-profdata-22",
        "llvm_profdata_version": "22.1.8",
        "profile_sha256": "0" * 64,
        "executed_functions": 49,
        "total_functions": 56,
        "seconds": 0.9,
        **extra,
    }


def test_a_merge_record_from_before_shards_reads_and_adds_no_line() -> None:
    record = from_json(MergeResult, _merge_record())
    assert (record.shards, record.unexecuted_main_crate, record.unexecuted_largest) == (None, None, None)
    assert shard_summary_lines(record) == []


def test_the_summary_of_shards_and_unexecuted_functions() -> None:
    shard = {
        "name": "main",
        "profile": "/w/shards/main/main.profdata",
        "profile_sha256": "1" * 64,
        "share_asked": 0.9,
        "share_reached": 0.8998632766608684,
        "weight": 9,
        "executed_functions": 19,
        "total_functions": 56,
        "only_this_shard": 3,
        "total_count": 683832,
        "overlap_with_rest": 0.024,
    }
    largest = [{"name": "hello_pgo::primes_below", "bytes": 845}]
    record = from_json(MergeResult, _merge_record(shards=[shard], unexecuted_main_crate=4, unexecuted_largest=largest))
    assert shard_summary_lines(record) == [
        "shard       main: share 90.0 % asked, 89.99 % reached (weight 9); 19 of 56 functions executed, 3 by no "
        "other shard; total count 683,832; overlap with the rest 0.02 %",
        "unexecuted  4 functions of the main crate no training executed; the 1 largest (bytes in the instrumented "
        "binary):",
        "                 845  hello_pgo::primes_below",
    ]


def test_unexecuted_functions_without_sizes_are_listed_by_name_not_as_the_largest() -> None:
    """A binary with no symbol table (a release profile with ``strip = true``, as miniserve's) sizes nothing:
    its unexecuted functions are not said to be the largest, nor shown with a size of 0."""
    largest = [{"name": "<std::io::error::Error>::kind", "bytes": 0}, {"name": "miniserve::main", "bytes": 0}]
    record = from_json(MergeResult, _merge_record(unexecuted_main_crate=1533, unexecuted_largest=largest))
    assert shard_summary_lines(record) == [
        "unexecuted  1533 functions of the main crate no training executed; 2 of them by name (the instrumented "
        "binary's symbol table gives none of them a size: stripped by the profile's strip, or inlined everywhere):",
        "            <std::io::error::Error>::kind",
        "            miniserve::main",
    ]


def test_one_name_of_several_unexecuted_symbols_is_said_to_be_several() -> None:
    """Two instances of a generic demangle to one name (a new user's tokei listed serde's next_value twice, htmlq
    html5ever's adjust_attributes): each line says it is one of them, not one function listed twice."""
    largest = [
        {"name": "serde::de::MapAccess::next_value", "bytes": 1574},
        {"name": "tokei::cli::Cli::from_args", "bytes": 1200},
        {"name": "serde::de::MapAccess::next_value", "bytes": 1574},
    ]
    record = from_json(MergeResult, _merge_record(unexecuted_main_crate=300, unexecuted_largest=largest))
    assert shard_summary_lines(record)[1:] == [
        "                1574  serde::de::MapAccess::next_value  (one of 2 symbols of this name)",
        "                1200  tokei::cli::Cli::from_args",
        "                1574  serde::de::MapAccess::next_value  (one of 2 symbols of this name)",
    ]


def test_the_shards_of_the_plan_weigh_one_unless_weighed(tmp_path: Path) -> None:
    workload = '[workload]\ndescription = "d"\n\n[[instance]]\nname = "cli"\nmode = "command"\n\n'
    phase = '[[instance.phase]]\nname = "p"\nkind = "command"\nargs = ["x"]\n'
    for name in ("main", "breadth"):
        (tmp_path / f"{name}.toml").write_text(workload + phase)
    config = load_config(_project(tmp_path), {"PGO_WORKLOAD": "main.toml,breadth.toml", "PGO_WEIGHTS": "breadth=3"})
    shards = plan_shards(config)
    assert [(s.name, s.weight, s.workload and s.workload.path.name) for s in shards] == [
        ("main", 1.0, "main.toml"),
        ("breadth", 3.0, "breadth.toml"),
    ]
    assert asked_shares([s.weight for s in shards]) == [0.25, 0.75]
    assert plan_shards(load_config(_project(tmp_path), {"PGO_WORKLOAD": "main.toml"})) == ()


@pytest.mark.refuses("shard-weight-beyond-llvm-profdata")
def test_shares_so_far_apart_that_a_weight_is_beyond_llvm_profdata_are_refused() -> None:
    """PGO_WEIGHTS=main=1e-300 (any number above 0 is taken): before, llvm-profdata merge ran with a weight of 301
    digits and failed ("input weight must be a positive integer"), after the training."""
    shares = asked_shares([1e-300, 1.0])
    weights = integer_weights(shares, [1000, 1000])
    with pytest.raises(ConfigError, match=r"need the shard breadth weighed 1e\+300 times, beyond the largest weight"):
        refuse_heavy(["main", "breadth"], weights, shares)
    refuse_heavy(["main", "breadth"], integer_weights(asked_shares([9.0, 1.0]), [1000, 50]), asked_shares([9.0, 1.0]))


@pytest.mark.refuses("shard-weights-beyond-llvm-profdata-whatever-the-totals")
@pytest.mark.parametrize(
    ("weights", "words"),
    [
        # a subnormal, "above 0": before, the training ran, then integer_weights divided by zero
        ("main=1e-320", "the weights of breadth (1) and main (1e-320) are 1e+320 times apart"),
        # before, refused only after the training, by refuse_heavy
        ("main=1e-300", "the weights of breadth (1) and main (1e-300) are 1e+300 times apart"),
        ("main=2.5e-36,breadth=1000", "the weights of breadth (1000) and main (2.5e-36) are 4e+38 times apart"),
    ],
)
def test_weights_beyond_llvm_profdata_whatever_the_totals_are_refused_by_the_plan(
    tmp_path: Path, weights: str, words: str
) -> None:
    workload = '[workload]\ndescription = "d"\n\n[[instance]]\nname = "cli"\nmode = "command"\n\n'
    phase = '[[instance.phase]]\nname = "p"\nkind = "command"\nargs = ["x"]\n'
    for name in ("main", "breadth"):
        (tmp_path / f"{name}.toml").write_text(workload + phase)
    config = load_config(_project(tmp_path), {"PGO_WORKLOAD": "main.toml,breadth.toml", "PGO_WEIGHTS": weights})
    with pytest.raises(ConfigError) as refused:
        plan_shards(config)
    assert refused.value.message.startswith(f"PGO_WEIGHTS: {words}: whatever the trainings' total counts")
    assert "beyond the largest weight llvm-profdata takes (18446744073709551615)" in refused.value.message
    assert refused.value.hint.startswith("ask for weights at most 3.4e+38 times apart in PGO_WEIGHTS")


def test_weights_as_far_apart_as_some_totals_allow_are_taken_and_weighed_within_llvm_profdata() -> None:
    """At the bound the plan takes, the totals that make it possible (the light shard's at the most, the heavy's 1)
    give weights llvm-profdata takes, and the merge's arithmetic divides by nothing that is 0."""
    names = ("main", "breadth")
    config_weights = [1.0, float(MAX_APART) / 2]
    refuse_far_apart([Shard(n, None, w) for n, w in zip(names, config_weights, strict=True)], "PGO_WEIGHTS")
    shares = asked_shares(config_weights)
    weights = integer_weights(shares, [1, MAX_TOTAL])
    assert max(weights) <= MAX_WEIGHT and min(weights) == 1
    refuse_heavy(list(names), weights, shares)
    with pytest.raises(ConfigError, match="beyond the largest weight"):  # the same weights, with equal totals
        refuse_heavy(list(names), integer_weights(shares, [1000, 1000]), shares)
