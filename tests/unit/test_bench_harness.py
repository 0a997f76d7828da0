"""The harness's pure parts: cores, arguments, the server's configuration, h2load's command and verdicts
(on h2load output captured here: tests/data/bench/h2load-*.txt)."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest

from recipes.bench import cli
from recipes.bench.commands import command_parts
from recipes.bench.load import LoadRun, add_summaries, load_argvs, trial_problem
from recipes.bench.servers import Server
from recipes.bench.settings import Build, choose_cores
from recipes.errors import BenchError, ConfigError
from recipes.web import h2load
from recipes.workload import BUILTIN_PROFILES, load_workload
from tests.conftest import DATA


def test_cores() -> None:
    assert choose_cores({0, 1}) == (1, 0)
    assert choose_cores({0, 1, 2, 3}, server=2) == (2, 0)
    assert choose_cores({0, 1, 2, 3}, server=2, load=3) == (2, 3)


@pytest.mark.refuses("fewer-two-usable-cores-core-not-usable")
def test_cores_refused() -> None:
    with pytest.raises(BenchError, match="needs two cores"):
        choose_cores({0})
    with pytest.raises(ConfigError, match="both 1"):
        choose_cores({0, 1}, server=1, load=1)
    outside = max(os.sched_getaffinity(0)) + 7
    with pytest.raises(ConfigError, match=f"--server-core {outside}: not a core"):
        choose_cores(set(os.sched_getaffinity(0)), server=outside)


@pytest.mark.refuses("bad-session-argument")
@pytest.mark.parametrize(
    ("posargs", "fragment"),
    [
        (["--trials", "x"], "--trials"),
        (["--trials", "0"], "not a positive integer"),
        (["--scale", "-1"], "not a positive number"),
        (["--scale", "nan"], "'nan' is not a positive number"),
        (["--scale", "inf"], "'inf' is not a positive number"),
        (["--trial-timeout", "nan"], "'nan' is not a positive number"),
        (["--trial-timeout", "inf"], "'inf' is not a positive number"),
        (["--server-core"], "expected one argument"),
        (["--trials", "9" * 400], "argument --trials: a number of 400 digits is too large for a positive integer "),
        (["--load-core", "1" + "0" * 310], "a number of 311 digits is too large for a core number"),
    ],
)
def test_parse_args_refusals(posargs: list[str], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        cli.parse_args(posargs)


@pytest.mark.refuses("bad-session-argument")
@pytest.mark.parametrize(
    ("posargs", "fragment"),
    [
        # --trials 99999999999999999999999 made the trials' order whole first: 9 GB in a minute, then killed
        (
            ["--trials", "99999999999999999999999"],
            "argument --trials: '99999999999999999999999' is too large: at most ",
        ),
        (["--trials", "1001"], "'1001' is too large: at most 1000 trials"),
        # ran each scenario 1e300 times its count (PGO_TRAIN_SCALE stops at 10000)
        (["--scale", "1e300"], "argument --scale: '1e300' is too large: at most 10000 times each scenario's count"),
        (["--trial-timeout", "1e308"], "'1e308' is too large: at most 604800 seconds"),
    ],
)
def test_parse_args_refuses_what_no_bench_can_run(posargs: list[str], fragment: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        cli.parse_args(posargs)


@pytest.mark.refuses("path-setting-no-file-can-have")
@pytest.mark.parametrize(
    ("posargs", "fragment"),
    [
        # RuntimeError of Path.expanduser, OSError ENAMETOOLONG of is_file: tracebacks before
        (["--candidate", "~nosuchuser/pgo"], "--candidate: '~nosuchuser/pgo' starts with ~nosuchuser"),
        (["--baseline", "~nosuchuser/plain"], "--baseline: '~nosuchuser/plain' starts with ~nosuchuser"),
        (["--candidate", "c" * 300], "--candidate: '" + "c" * 60 + "…' holds a name of 300 bytes"),
    ],
)
def test_parse_args_refuses_a_build_path_no_file_can_have(posargs: list[str], fragment: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        cli.parse_args(posargs)


def test_parse_args_passes_the_rest_on() -> None:
    args, rest = cli.parse_args(["--trials", "3", "--out", "/tmp/w", "--scenarios=static-5k", "--min-functions", "9"])
    assert (args.trials, args.scenarios, args.baseline, args.scale) == (3, "static-5k", None, 1.0)
    assert rest == ["--out", "/tmp/w", "--min-functions", "9"]
    defaults, _ = cli.parse_args([])
    assert defaults.trials == 5


@pytest.mark.refuses("not-one-candidate-label-per-candidate")
def test_repeated_candidates_and_their_labels(tmp_path: Path) -> None:
    args, _ = cli.parse_args(
        ["--candidate", "a", "--candidate", str(tmp_path / "b"), "--candidate-label", "PGO", "--no-coverage"]
    )
    assert args.candidates == (Path("a").resolve(), tmp_path / "b")
    assert args.candidate == Path("a").resolve()
    assert args.candidate_labels == ("PGO",) and args.coverage is False
    assert cli._labels(args, ["candidate", "candidate-2"]) == ["PGO", "candidate-2"]
    with pytest.raises(ConfigError, match="2 --candidate-label for 1 candidate"):
        cli.parse_args(["--candidate", "a", "--candidate-label", "x", "--candidate-label", "y"])


def test_relative_builds_are_taken_from_the_project_not_from_nox_s_directory(tmp_path: Path) -> None:
    # nox -f path/to/noxfile.py runs the session in the noxfile's directory; the user wrote the path from the crate's
    args, _ = cli.parse_args(["--baseline", "plain/jaq", "--candidate", "target/pgo/optimised/jaq"], tmp_path)
    assert args.baseline == tmp_path / "plain" / "jaq"
    assert args.candidates == (tmp_path / "target" / "pgo" / "optimised" / "jaq",)


def _server(tmp_path: Path) -> Server:
    return Server(Build("x", tmp_path / "x"), None, 1001, 1002, tmp_path / "l", tmp_path / "i")  # type: ignore[arg-type]


BY_NAME = {s.name: s for s in load_workload(BUILTIN_PROFILES / "demo-server.toml").scenarios}


def test_load_argv_shapes(tmp_path: Path) -> None:
    server = _server(tmp_path)
    (h1,) = load_argvs(BY_NAME["cached-5k-h1"], server, 1000, tmp_path / "u.txt")
    assert h1[0] == "h2load" and "--h1" in h1 and h1[-1] == "http://127.0.0.1:1001/page/bench"
    assert h1[h1.index("-n") + 1] == "1000" and h1[h1.index("-t") + 1] == "1"
    (h2,) = load_argvs(BY_NAME["cached-5k-h2"], server, 1000, tmp_path / "u.txt")
    assert "--h1" not in h2 and h2[h2.index("-m") + 1] == "16"
    (rate,) = load_argvs(BY_NAME["cached-5k-rate"], server, 1000, tmp_path / "u.txt")
    assert rate[1:3] == ["--rps", "500"]
    tls = load_argvs(BY_NAME["tls-handshake"], server, 450, tmp_path / "u.txt")
    # a fresh client per request (h2load resumes TLS sessions when a client reconnects): -c B -n B runs
    assert [(a[a.index("-n") + 1], a[a.index("-c") + 1]) for a in tls] == [("200", "200"), ("200", "200"), ("50", "50")]
    assert all(a[-1].startswith("https://127.0.0.1:1002/") and "--h1" in a for a in tls)
    (mix,) = load_argvs(BY_NAME["site-mix"], server, 1000, tmp_path / "u.txt")
    assert mix[-2:] == ["-i", str(tmp_path / "u.txt")]
    lines = (tmp_path / "u.txt").read_text().splitlines()
    assert len(lines) == len(BY_NAME["site-mix"].paths) and all(u.startswith("http://127.0.0.1:1001/") for u in lines)


def test_one_request_clients_take_turns_at_the_first_path(tmp_path: Path) -> None:
    """A client with one request asks only for the first URI it is given: runs of one-request clients over
    several paths start at each path in turn, so every path is asked for."""
    scenario = dataclasses.replace(BY_NAME["site-mix"], one_per_connection=True, connections=10, rps=None)
    argvs = load_argvs(scenario, _server(tmp_path), 40, tmp_path / "u.txt")
    assert len(argvs) == 4
    files = [Path(a[a.index("-i") + 1]) for a in argvs]
    firsts = [f.read_text().splitlines()[0] for f in files]
    paths = scenario.paths
    assert firsts == [f"http://127.0.0.1:1001{p}" for p in (paths * 4)[:4]]
    assert all(sorted(f.read_text().splitlines()) == sorted(files[0].read_text().splitlines()) for f in files)


def test_rotated_urls() -> None:
    assert h2load.rotated(["a", "b", "c"], 0) == ["a", "b", "c"]
    assert h2load.rotated(["a", "b", "c"], 4) == ["b", "c", "a"]
    assert h2load.rotated([], 3) == []


def _run(name: str, returncode: int = 0, *, timed_out: bool = False) -> LoadRun:
    text = (DATA / "bench" / name).read_text()
    try:
        summary: h2load.H2loadSummary | None = h2load.parse_summary(text)
    except ValueError:
        summary = None
    return LoadRun(returncode, 0.1, 0.05, text, summary, timed_out)


def test_a_full_run_of_2xx_is_valid() -> None:
    assert trial_problem(_run("h2load-ok.txt"), 100, "2xx") == ""


@pytest.mark.parametrize(
    ("name", "requests", "fragment"),
    [
        ("h2load-404.txt", 100, "expected all 2xx, got 100 4xx"),
        ("h2load-dead.txt", 100, "0 of 100 requests done"),
        ("h2load-ok.txt", 200, "of 200 requests done"),
    ],
)
def test_invalid_runs(name: str, requests: int, fragment: str) -> None:
    assert fragment in trial_problem(_run(name), requests, "2xx")


def test_a_killed_or_failed_h2load_is_invalid() -> None:
    assert "was killed" in trial_problem(_run("h2load-ok.txt", timed_out=True), 100, "2xx")
    assert "exited with 1" in trial_problem(_run("h2load-ok.txt", returncode=1), 100, "2xx")
    nothing = LoadRun(1, 0.0, 0.0, "h2load: unrecognized option '--nope'\n", None)
    assert "no summary: h2load: unrecognized option" in trial_problem(nothing, 100, "2xx")


def test_runs_added_up() -> None:
    ok = h2load.parse_summary((DATA / "bench" / "h2load-ok.txt").read_text())
    bad = h2load.parse_summary((DATA / "bench" / "h2load-404.txt").read_text())
    total = add_summaries([ok, ok, bad])
    assert (total.total, total.done, total.succeeded, total.failed) == (300, 300, 200, 100)
    assert total.status == {"2xx": 200, "3xx": 0, "4xx": 100, "5xx": 0}
    assert h2load.check(add_summaries([ok, ok]), 200, "2xx") is None
    assert "got 200 2xx, 100 4xx" in (h2load.check(total, 300, "2xx") or "")


@pytest.mark.refuses("command-scenario-cwd-not-directory")
def test_a_command_scenario_whose_cwd_is_not_a_directory_is_refused(tmp_path: Path) -> None:
    scenario = '\n[[bench.scenario]]\nname = "x"\ninstance = "cli"\nkind = "command"\nargs = ["primes", "10"]\n'
    path = tmp_path / "w.toml"
    path.write_text((BUILTIN_PROFILES / "hello.toml").read_text() + scenario + 'cwd = "{project}/data"\n')
    chosen = next(s for s in load_workload(path).scenarios if s.name == "x")
    values = {"project": str(tmp_path), "work": str(tmp_path / "work")}
    with pytest.raises(ConfigError, match=rf"scenario x: cwd {tmp_path / 'data'} is not a directory \(create it"):
        command_parts(chosen, values, {})
    (tmp_path / "data").mkdir()
    assert command_parts(chosen, values, {}) == (["primes", "10"], tmp_path / "data")
    # a cwd no directory can be: RuntimeError of Path.expanduser, OSError ENAMETOOLONG of is_dir, before
    for cwd, shown in (("~nosuchuser/x", tmp_path / "~nosuchuser/x"), ("{env:LONG}", tmp_path / ("d" * 300))):
        path.write_text((BUILTIN_PROFILES / "hello.toml").read_text() + scenario + f"cwd = {cwd!r}\n")
        chosen = next(s for s in load_workload(path).scenarios if s.name == "x")
        with pytest.raises(ConfigError, match=rf"scenario x: cwd {re.escape(str(shown))} is not a directory"):
            command_parts(chosen, values, {"LONG": "d" * 300})
