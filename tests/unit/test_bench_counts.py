"""The counts (``nox -s bench -- --measure counts``): valgrind's output files parsed (real captures in
tests/data/valgrind/: cachegrind on hello's ``collatz 3000``, callgrind dumps of tests/fixtures/bare-server
between a zero and a dump, and at its termination after a zero; valgrind's log of a binary using AVX-512), the
estimate and why it weighs mispredictions, the table, the spread and the gate."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from recipes.bench import cli
from recipes.bench.counting import _dump_file
from recipes.bench.counts import (
    CACHEGRIND,
    CALLGRIND,
    Counts,
    dump_trigger,
    estimate,
    find_tool,
    own_object,
    parse_objects,
    parse_totals,
    read_totals,
    refuse_unknown_instruction,
    unknown_instruction,
    version,
)
from recipes.bench.counts_report import (
    HEADING,
    CountsResult,
    CountTrial,
    Gate,
    best_on_held_out,
    check_gate,
    from_json,
    human,
    markdown,
    raise_gate,
    too_short,
)
from recipes.bench.cpu_report import to_json as report_to_json
from recipes.bench.meta import Meta
from recipes.bench.variants import both_profiles_record, parse_variant, pgo_profile
from recipes.errors import BenchError, ConfigError, MissingInput, ToolchainError

DATA = Path(__file__).parent.parent / "data" / "valgrind"
CACHEGRIND_OUT = DATA / "hello-collatz-3000.cachegrind.out"
CALLGRIND_TRIAL = DATA / "bare-server-trial.callgrind.out"
CALLGRIND_END = DATA / "bare-server-termination.callgrind.out"


def to_json(results: list[CountsResult], meta: Meta) -> dict[str, Any]:
    """results.json of a counts run (:func:`recipes.bench.cpu_report.to_json` with :data:`HEADING`)."""
    return report_to_json(results, meta, HEADING)


def iai_estimate(counts: Counts) -> float:
    """iai-callgrind's estimate, for comparison: L1 hits + 5 x LL hits + 35 x RAM accesses (no mispredictions)."""
    accesses = counts.instructions + counts["Dr"] + counts["Dw"]
    l1_hits = accesses - counts.l1_misses
    ll_hits = counts.l1_misses - counts.ll_misses
    return l1_hits + 5 * ll_hits + 35 * counts.ll_misses


def test_cachegrind_summary_read_by_its_events_header() -> None:
    counts = read_totals(CACHEGRIND_OUT)
    # the same run's totals as valgrind printed them in its log (tests/data/valgrind/hello-collatz-3000.valgrind.log)
    log = (DATA / "hello-collatz-3000.valgrind.log").read_text()
    assert counts.instructions == 2_279_619 and "I   refs:      2,279,619" in log
    assert counts["I1mr"] == 1_716 and counts["ILmr"] == 1_662
    assert counts["DLmr"] + counts["DLmw"] == 2_209 and "LLd misses:        2,209" in log
    assert (counts["Bcm"], counts["Bim"]) == (8_114, 340) and "Mispredicts:       8,454" in log
    assert counts.ll_misses == 3_871 and counts.mispredicts == 8_454


@pytest.mark.refuses("counted-trial-under-1-000-000-instructions")
def test_callgrind_dump_in_its_own_order_of_events() -> None:
    text = CALLGRIND_TRIAL.read_text()
    assert "\nevents: Ir Dr Dw I1mr D1mr" in text  # not cachegrind's order
    counts = parse_totals(text)
    assert counts.instructions == 8_914_946 and counts["Dr"] == 2_095_551 and counts["I1mr"] == 567
    assert counts["Bcm"] == 82_766 and counts["Bim"] == 22_046
    assert dump_trigger(text) == "dump t2"
    # a dump at termination after a zero: callgrind writes "summary: 0", the other events left out
    end = read_totals(CALLGRIND_END)
    assert (
        end.instructions == 0 and end["Bim"] == 0 and dump_trigger(CALLGRIND_END.read_text()) == "Program termination"
    )
    assert too_short(end, "a trial of 2000 requests", "request").startswith(
        "too short for a figure: a trial of 2000 requests counted 0 instructions, under 1,000,000"
    )
    assert too_short(counts, "x", "request") == ""


@pytest.mark.refuses("valgrind-output-file-without-events-summary-line")
def test_a_file_without_its_totals_is_refused() -> None:
    lines = CACHEGRIND_OUT.read_text().splitlines()
    with pytest.raises(BenchError) as cut:
        parse_totals("\n".join(lines[:-1]), "cut.out")  # killed before valgrind wrote its summary
    assert cut.value.line() == (
        "cut.out has no summary line (valgrind did not finish writing it: see the valgrind log beside it)"
    )
    with pytest.raises(BenchError) as unsimulated:
        parse_totals("events: Ir\nsummary: 12\n", "plain.out")
    assert "plain.out counts no I1mr" in unsimulated.value.line() and "--branch-sim=yes" in unsimulated.value.line()
    with pytest.raises(BenchError, match="no events line"):
        parse_totals("", "empty.out")


def test_the_flags_fix_the_simulated_caches() -> None:
    for flags in (CACHEGRIND, CALLGRIND):
        assert {"--cache-sim=yes", "--branch-sim=yes", "--LL=8388608,16,64"} <= set(flags)
    # the capture's own header: the caches given, not the host's 320 MB L3 valgrind warned about
    assert "desc: LL cache:         8388608 B, 64 B, 16-way associative" in CACHEGRIND_OUT.read_text()


def test_the_estimate_weighs_misses_and_mispredictions() -> None:
    counts = read_totals(CACHEGRIND_OUT)
    l1_only = counts.l1_misses - counts.ll_misses
    assert estimate(counts) == 0.5 * 2_279_619 + 10 * l1_only + 35 * 3_871 + 17 * 8_454
    assert estimate(counts + counts) == 2 * estimate(counts)


def test_mispredictions_rank_the_builds_that_instructions_alone_rank_wrongly() -> None:
    """The issue's jaq regex filter: our profile's build executes ~2.5 % more instructions than cargo-pgo's and
    mispredicts 0.84 M fewer indirect branches; CPU time put ours ahead. Instructions and iai-callgrind's estimate
    (no mispredictions) rank cargo-pgo's first; this estimate ranks ours first."""
    same = {"Dr": 120_000_000, "Dw": 60_000_000, "I1mr": 30_000, "D1mr": 900_000, "DLmr": 40_000, "Bcm": 3_970_000}
    ours = Counts({**same, "Ir": 439_300_000, "Bim": 2_000_000})
    cargo_pgo = Counts({**same, "Ir": 428_300_000, "Bim": 2_840_000})
    assert ours.instructions > cargo_pgo.instructions
    assert iai_estimate(ours) > iai_estimate(cargo_pgo)
    assert estimate(ours) < estimate(cargo_pgo)


@pytest.mark.refuses("build-uses-instruction-valgrind-does-not-know")
def test_an_instruction_valgrind_does_not_know_is_refused_in_one_line() -> None:
    log_path = DATA / "avx512-sigill.valgrind.log"
    log = log_path.read_text()
    assert unknown_instruction(log) == "bytes 0x62 0xF1 0x75 0x48 0xEF 0xC9 0xB8 0x0 0x0 0x0 at 0x109129"
    assert unknown_instruction((DATA / "hello-collatz-3000.valgrind.log").read_text()) == ""
    with pytest.raises(BenchError) as refused:
        refuse_unknown_instruction("PGO", Path("/x/avx"), log, log_path, "valgrind-3.19.0")
    line = refused.value.line()
    assert line.startswith("PGO: valgrind-3.19.0 cannot run /x/avx: it does not know an instruction the binary uses")
    assert "AVX-512" in line and "--measure cpu" in line and "\n" not in line
    refuse_unknown_instruction("plain", Path("/x/hello"), "", log_path, "valgrind-3.19.0")  # nothing to refuse


@pytest.mark.refuses("measure-counts-without-valgrind-callgrind-control-for")
def test_valgrind_missing_names_the_package(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError) as missing:
        find_tool("valgrind", {"PATH": str(tmp_path)})
    assert missing.value.line() == (
        "--measure counts runs the builds under valgrind and valgrind is not on the PATH "
        "(install the Debian package valgrind (apt-get install valgrind))"
    )
    assert find_tool("valgrind", {"PATH": "/usr/bin:/bin"}).name == "valgrind"


def _trial(build: str, index: int, counts: Counts, done: int = 2) -> CountTrial:
    return CountTrial(build, index, done, done, dict(counts.events))


def _result(name: str, status: str, base: Counts, cand: Counts, trials: int = 3) -> CountsResult:
    rows = [t for i in range(1, trials + 1) for t in (_trial("baseline", i, base), _trial("candidate", i, cand))]
    return CountsResult(name, name, rows, unit="run", held_out={"status": status, "trained": 1, "total": 1})


BASE = read_totals(CACHEGRIND_OUT) + read_totals(CACHEGRIND_OUT)  # two runs of a trial


def _scaled(counts: Counts, factor: float) -> Counts:
    return Counts({k: round(v * factor) for k, v in counts.events.items()})


def test_figures_per_run_difference_and_spread() -> None:
    result = _result("collatz", "trained", BASE, _scaled(BASE, 0.9))
    assert result.median("baseline", "instructions") == 2_279_619  # per run: two runs in each trial
    assert result.difference("candidate", "instructions") == pytest.approx(-0.1, abs=1e-6)
    assert result.difference("candidate") == pytest.approx(-0.1, abs=1e-5)
    assert result.spread("baseline") == 0.0 and result.paired("candidate") == pytest.approx([-0.1] * 3, abs=1e-5)
    # one trial 2 % higher: the spread says so, the median does not move
    result.trials[2] = _trial("baseline", 2, _scaled(BASE, 1.02))
    assert result.spread("baseline") == pytest.approx(0.02, abs=1e-5)
    assert result.median("baseline", "instructions") == 2_279_619
    data = to_json([result], {"builds": []})
    again, _meta = from_json(data)
    assert again[0].median("candidate", "estimate") == result.median("candidate", "estimate")
    assert data["scenarios"][0]["comparisons"][0]["differences"]["instructions"] == pytest.approx(-0.1, abs=1e-6)


def test_the_table_says_what_it_counts_and_what_it_cannot() -> None:
    results = [_result("collatz", "trained", BASE, _scaled(BASE, 0.9))]
    invalid = _result("broken", "held-out", BASE, BASE)
    invalid.trials[0].problem = "too short for a figure: a trial of 1 runs counted 306,642 instructions"
    meta: Meta = {
        "builds": [{"key": "baseline", "label": "plain", "binary": "/b"}, {"key": "candidate", "label": "PGO"}],
        "valgrind": {"version": "valgrind-3.19.0", "cachegrind": list(CACHEGRIND), "callgrind": list(CALLGRIND)},
        "trials": 3,
    }
    text = markdown([*results, invalid], meta)
    assert text.startswith("# Counts per run or request: PGO vs plain (valgrind-3.19.0)")
    assert "| collatz (per run) | trained | plain | 2.28 M |" in text
    assert "| 2.05 M (\u221210.0 %) |" in text
    assert "--tool=cachegrind --cache-sim=yes --branch-sim=yes" in text
    assert "the kernel's time" in text and "threads serialised" in text
    assert "- broken: invalid: 1 of 6 trials invalid; first (baseline #1): too short for a figure" in text
    assert human(176_490_000) == "176.49 M" and human(8_112) == "8.11 k" and human(340) == "340"
    assert math.isnan(CountTrial("baseline", 1, 0, 0, {}).per_unit()["instructions"])


@pytest.mark.refuses("counts-gate-candidate-not-better-baseline-margin", "gate-no-scenario-kind-among-those-chosen")
def test_the_gate_passes_and_fails_by_the_estimate() -> None:
    trained = _result("trained-row", "trained", BASE, _scaled(BASE, 0.95))  # 5 % better
    held = _result("held-row", "held-out", BASE, _scaled(BASE, 1.02))  # 2 % worse
    named = {"baseline": "plain", "candidate": "PGO"}
    verdicts = check_gate(Gate(trained=3, held_out=3), [trained, held], named)
    assert verdicts == [
        "gate passed: PGO vs plain on trained scenario trained-row: estimate \u22125.0 % (margin 3 %)",
        "gate passed: PGO vs plain on held-out scenario held-row: estimate +2.0 % (margin 3 %)",
    ]
    raise_gate(verdicts, Path("results.md"))
    verdicts = check_gate(Gate(trained=6, held_out=1), [trained, held], named)
    assert verdicts == [
        "gate FAILED: PGO vs plain on trained scenario trained-row: estimate \u22125.0 %, not at least 6 % better",
        "gate FAILED: PGO vs plain on held-out scenario held-row: estimate +2.0 %, worse by more than 1 %",
    ]
    with pytest.raises(BenchError) as failed:
        raise_gate(verdicts, Path("results.md"))
    assert failed.value.line() == (
        "counts gate: PGO vs plain on trained scenario trained-row: estimate \u22125.0 %, not at least 6 % better "
        "(and 1 more) (see results.md)"
    )
    with pytest.raises(ConfigError) as nothing:
        check_gate(Gate(held_out=1), [trained], named)
    assert nothing.value.line() == (
        "--gate-held-out 1: none of the scenarios measured is held-out "
        "(measure a held-out scenario (--scenarios), or drop --gate-held-out)"
    )


@pytest.mark.refuses("gate-trained-gate-held-out-without-measure")
def test_counts_arguments() -> None:
    args, rest = cli.parse_args(["--measure", "counts", "--gate-trained", "2", "--out", "x"])
    assert (args.measure, args.trials, args.scale, args.coverage) == ("counts", 3, 0.1, False)
    assert args.gate == Gate(trained=2.0) and rest == ["--out", "x"]
    args, _ = cli.parse_args(["--measure", "counts", "--trials", "2", "--scale", "0.5"])
    assert (args.trials, args.scale) == (2, 0.5)
    args, _ = cli.parse_args([])
    assert (args.measure, args.trials, args.scale, args.coverage) == ("cpu", 5, 1.0, True)
    with pytest.raises(ConfigError) as cpu_gate:
        cli.parse_args(["--gate-trained", "2"])
    assert cpu_gate.value.line() == (
        "--gate-trained and --gate-held-out judge the counts (add --measure counts (CPU time is too noisy to gate))"
    )
    with pytest.raises(ConfigError, match="invalid choice: 'time'"):
        cli.parse_args(["--measure", "time"])
    with pytest.raises(ConfigError, match="not a percentage from 0 to 100"):
        cli.parse_args(["--measure", "counts", "--gate-held-out", "-1"])


@pytest.mark.refuses("valgrind-whose-version-not-valgrind")
def test_a_valgrind_that_is_not_one_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "valgrind"
    fake.write_text("#!/bin/sh\necho 'qemu-x86_64 version 7.2'\n")
    fake.chmod(0o755)
    with pytest.raises(ToolchainError) as refused:
        version(fake, {"PATH": "/usr/bin:/bin"})
    assert refused.value.line() == (
        f"{fake} --version said 'qemu-x86_64 version 7.2' (install the Debian package valgrind)"
    )
    path = {"PATH": "/usr/bin:/bin"}
    assert version(find_tool("valgrind", path), path).startswith("valgrind-3.")


@pytest.mark.refuses("callgrind-wrote-no-dump-for-trial")
def test_a_dump_that_callgrind_did_not_write_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "baseline.callgrind.out"
    (tmp_path / "baseline.callgrind.out.1").write_text(CALLGRIND_TRIAL.read_text())  # "dump t2"
    assert _dump_file(out, "dump t2") == tmp_path / "baseline.callgrind.out.1"
    with pytest.raises(BenchError) as missing:
        _dump_file(out, "dump baseline-trial-3")
    assert missing.value.line() == (
        f"callgrind wrote no dump 'dump baseline-trial-3' beside {out} (see the valgrind log beside it)"
    )


def test_the_best_build_on_the_held_out_scenarios() -> None:
    def three(name: str, status: str, icp: float, no_icp: float) -> CountsResult:
        result = _result(name, status, BASE, _scaled(BASE, icp))
        result.trials += [_trial("candidate-2", i, _scaled(BASE, no_icp)) for i in (1, 2, 3)]
        result.builds = ["baseline", "candidate", "candidate-2"]
        return result

    named = {"baseline": "plain", "candidate": "PGO", "candidate-2": "PGO -disable-icp"}
    results = [three("trained", "trained", 0.8, 0.7), three("a", "held-out", 0.9, 0.95), three("b", "partly", 0.9, 0.9)]
    line = best_on_held_out(results, named)
    assert line.startswith("best by the estimate on the 2 held-out scenarios: PGO (geometric mean against plain: ")
    assert line.index("PGO -disable-icp \u22127.5 %") > line.index("PGO \u221210.0 %") and line.endswith(
        "plain +0.0 %)"
    )
    assert best_on_held_out(results[:1], named) == ""  # no held-out scenario
    assert best_on_held_out([_result("a", "held-out", BASE, BASE)], named) == ""  # one candidate


@pytest.mark.refuses("profile-use-args-not-llvm-options-given")
def test_profile_use_args_are_llvm_options() -> None:
    assert parse_variant("-disable-icp") == ("-disable-icp",)
    assert parse_variant(" -disable-icp  -profile-summary-cutoff-hot=990000 ") == (
        "-disable-icp",
        "-profile-summary-cutoff-hot=990000",
    )
    for text, why in (("", "no option"), ("disable-icp", "'disable-icp' is not an LLVM option"), ("-a;b", "'-a;b'")):
        with pytest.raises(ConfigError) as refused:
            parse_variant(text)
        assert why in refused.value.line() and "--profile-use-args=-disable-icp" in refused.value.line()
    args, _ = cli.parse_args(["--measure", "counts", "--profile-use-args=-disable-icp"])
    assert args.variants == (("-disable-icp",),)
    # beside --candidate as well: the work dir's profile built again, after the given candidates
    args, _ = cli.parse_args(["--candidate", "/bin/true", "--profile-use-args=-disable-icp"])
    assert args.candidates == (Path("/bin/true").resolve(),) and args.variants == (("-disable-icp",),)


def test_a_dump_split_by_object_adds_up_to_its_totals() -> None:
    """callgrind's objects: the server's own binary apart from libc (whose allocator is what varies between a
    server's trials); each object's self cost, the inclusive cost lines after ``calls=`` left out."""
    for path, binary in (
        (CALLGRIND_TRIAL, "/tmp/cnt/bare-server/target/release/bare-server"),
        (DATA / "demo-server-cached-5k-h1-log.callgrind.out", "<work>/bench/bin/plain-demo-server"),
    ):
        text = path.read_text()
        objects = parse_objects(text, str(path))
        totals = next(line for line in text.splitlines() if line.startswith("totals:")).split()[1:]
        events = next(line for line in text.splitlines() if line.startswith("events:")).split()[1:]
        whole = Counts({})
        for counts in objects.values():
            whole = whole + counts
        assert [whole[e] for e in events] == [int(v) for v in totals]
        assert "/usr/lib/x86_64-linux-gnu/libc.so.6" in objects and binary in objects
    demo = parse_objects((DATA / "demo-server-cached-5k-h1-log.callgrind.out").read_text())
    own = demo["<work>/bench/bin/plain-demo-server"]
    assert own.instructions == 131_489_744 and demo["/usr/lib/x86_64-linux-gnu/libc.so.6"].instructions == 54_853_113
    assert own_object(demo, Path("/nonexistent/plain-demo-server")) is None
    bare = parse_objects(CALLGRIND_TRIAL.read_text())
    assert own_object(bare, Path("/tmp/cnt/bare-server/target/release/bare-server")) is not None
    with pytest.raises(BenchError, match="no events line"):
        parse_objects("ob=(1) x\n0 1 2\n", "odd.out")


def test_a_server_is_judged_in_its_binary() -> None:
    result = _result("cached", "held-out", BASE, _scaled(BASE, 0.9))
    assert result.judged == "estimate" and "binary_estimate" not in result.figures
    own = _scaled(BASE, 0.5)
    for trial in result.trials:
        trial.binary_events = dict((own if trial.build == "baseline" else _scaled(own, 0.8)).events)
    result.trials[0].events = dict(_scaled(BASE, 1.05).events)  # the whole process varies, the binary does not
    assert result.judged == "binary_estimate"
    assert result.spread("baseline", "binary_estimate") == 0.0 and result.spread("baseline") > 0.04
    assert result.difference("candidate", "binary_estimate") == pytest.approx(-0.2, abs=1e-5)
    verdicts = check_gate(Gate(held_out=1), [result], {"baseline": "plain", "candidate": "PGO"})
    assert verdicts == [
        "gate passed: PGO vs plain on held-out scenario cached: estimate in the binary \u221220.0 % (margin 1 %)"
    ]
    assert "| 0.00 % (whole: 5.00 %) |" in markdown([result], {"builds": []})


@pytest.mark.refuses("profile-use-args-without-profile-work-dir")
def test_a_knob_needs_the_work_dirs_profile(tmp_path: Path) -> None:
    with pytest.raises(MissingInput) as none:
        pgo_profile(tmp_path)
    assert none.value.line() == (
        f"--profile-use-args needs the profile of the work dir's PGO build, and {tmp_path} has none "
        "(run `nox -s pgo` first)"
    )
    profile = tmp_path / "store" / "x.profdata"
    captured = json.loads((DATA.parent / "report-demo-server-bolt.json").read_text())  # a whole optimise record
    record = {"schema": 1, "optimise": {**captured["optimise"], "store_path": str(profile)}}
    (tmp_path / "report.json").write_text(json.dumps(record))
    with pytest.raises(MissingInput):
        pgo_profile(tmp_path)  # recorded, but gone
    profile.parent.mkdir()
    profile.write_bytes(b"x")
    assert pgo_profile(tmp_path) == profile


@pytest.mark.refuses("both-profiles-without-profiles-work-dir")
def test_both_profiles_need_the_work_dirs_profiles(tmp_path: Path) -> None:
    with pytest.raises(MissingInput) as none:
        both_profiles_record(tmp_path)
    assert none.value.line() == (
        f"--both-profiles needs the profile of the work dir's PGO build, and {tmp_path} has none "
        "(run `nox -s pgo` first)"
    )
    read, whole = tmp_path / "store" / "x.profdata", tmp_path / "demo-server.profdata"
    captured = json.loads((DATA.parent / "report-demo-server-bolt.json").read_text())  # a whole optimise record
    partial = {"store_path": str(read), "partial": True, "whole_profile": str(whole), "whole_profile_sha256": "ab" * 32}
    (tmp_path / "report.json").write_text(json.dumps({"schema": 1, "optimise": {**captured["optimise"], **partial}}))
    read.parent.mkdir()
    read.write_bytes(b"x")
    with pytest.raises(MissingInput) as gone:
        both_profiles_record(tmp_path)  # the partial one is there, the whole one it came from is not
    assert gone.value.line() == (
        f"--both-profiles needs the whole profile of the PGO build's partial one, {whole}, and it is gone "
        "(run `nox -s pgo` again)"
    )
    whole.write_bytes(b"y")
    assert both_profiles_record(tmp_path).whole_profile == whole
