"""Bench scenarios declared in the workload file: the shipped ones load, every refusal names file, table and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from recipes.bench.scenarios import held_out, require_scenarios, select
from recipes.errors import ConfigError
from recipes.workload import BUILTIN_PROFILES, load_workload
from recipes.workload.fields import MAX_RUNS

DEMO = BUILTIN_PROFILES / "demo-server.toml"
HELLO = BUILTIN_PROFILES / "hello.toml"

SERVER = """
[workload]
description = "d"

[setup]
certs = ["ecdsa"]

[[instance]]
name = "srv"
mode = "server"
args = ["--port", "{http_port}"]

[[instance.phase]]
name = "pages"
kind = "http"
paths = ["/a", "/b"]
requests = 10

[[bench.instance]]
name = "one"
mode = "server"
args = ["--port", "{http_port}", "--cert", "{ecdsa_cert}"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "w.toml"
    path.write_text(text)
    return path


def test_the_demo_servers_twelve_scenarios_load() -> None:
    workload = load_workload(DEMO)
    names = [s.name for s in workload.scenarios]
    assert len(names) == len(set(names)) == 12
    by_name = {s.name: s for s in workload.scenarios}
    assert {s.instance.name for s in workload.scenarios} == {"one-worker", "one-worker-log", "one-worker-no-cache"}
    assert all("workers = 1" in i.options.config for i in workload.bench_instances)
    assert by_name["cached-5k-rate"].rps == 500
    handshake = by_name["tls-handshake"]
    assert (handshake.kind, handshake.one_per_connection, handshake.tls, handshake.connections) == (
        "handshakes",
        True,
        True,
        200,
    )
    for scenario in workload.scenarios:
        assert scenario.count >= scenario.connections and scenario.unit == "request"


def test_hello_declares_command_scenarios_one_held_out() -> None:
    workload = load_workload(HELLO)
    assert [(s.name, s.kind, s.unit, s.instance.name) for s in workload.scenarios] == [
        ("collatz", "command", "run", "cli"),
        ("primes-held-out", "command", "run", "cli"),
        ("collatz-held-out", "command", "run", "cli"),
    ]
    assert [held_out(s, workload).status for s in workload.scenarios] == ["trained", "held-out", "held-out"]


def test_held_out_marking_of_paths(tmp_path: Path) -> None:
    text = (
        SERVER
        + """
[[bench.scenario]]
name = "same"
instance = "one"
kind = "http"
paths = ["/a", "/b", "/a"]
requests = 5

[[bench.scenario]]
name = "some"
instance = "srv"
kind = "http"
paths = ["/a", "/c"]
requests = 5

[[bench.scenario]]
name = "new"
instance = "one"
kind = "handshakes"
handshakes = 5
"""
    )
    workload = load_workload(write(tmp_path, text))
    marks = {s.name: held_out(s, workload) for s in workload.scenarios}
    assert marks["same"].status == "trained"
    assert (marks["some"].status, marks["some"].trained, marks["some"].total) == ("partly", 1, 2)
    assert marks["some"].describe("paths") == "partly: 1 of 2 paths in the training"
    assert marks["new"].status == "held-out"  # /health is requested by no training phase


def test_select_keeps_the_order_given_and_drops_repeats() -> None:
    scenarios = load_workload(DEMO).scenarios
    chosen = select("static-5k,cached-5k-h1,static-5k", scenarios)
    assert [s.name for s in chosen] == ["static-5k", "cached-5k-h1"]
    assert select(None, scenarios) == list(scenarios)
    assert select("all", scenarios) == list(scenarios)


@pytest.mark.refuses("scenarios-names-unknown-scenario-none")
@pytest.mark.parametrize(
    ("names", "fragment"), [("cached-5k-h3", "unknown scenario 'cached-5k-h3'"), (",", "no scenario")]
)
def test_select_refuses(names: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        select(names, load_workload(DEMO).scenarios)


def test_scaled_counts_never_fall_below_one_request_per_connection() -> None:
    by_name = {s.name: s for s in load_workload(DEMO).scenarios}
    assert by_name["cached-5k-1024c"].scaled(0.0001).count == 1024
    assert by_name["cached-5k-h1"].scaled(0.5).count == by_name["cached-5k-h1"].count // 2
    assert by_name["cached-5k-h1"].warmup_requests == 2000
    hello = load_workload(HELLO).scenarios[0]
    assert (hello.scaled(0.001).count, hello.warmup_requests) == (1, 1)


@pytest.mark.refuses("workload-declares-no-bench-scenario")
def test_a_workload_without_scenarios_is_refused_saying_how_to_add_one() -> None:
    workload = load_workload(BUILTIN_PROFILES / "multi.toml")
    with pytest.raises(ConfigError) as caught:
        require_scenarios(workload)
    line = caught.value.line()
    assert "declares no bench scenario" in line and "[[bench.scenario]]" in line and "profiles/README.md" in line
    assert "\n" not in line


@pytest.mark.refuses(
    "name-not-ascii-letters-digits",
    "scenario-kind-instance-mode-cannot-run",
    "scenario-expect-not-class",
    "scenario-without-path",
    "scenario-path-does-not-start",
    "scenario-header-not-name-value",
    "rps-one-per-connection",
    "scenario-head-over-http1",
)
@pytest.mark.parametrize(
    ("scenario", "fragment"),
    [
        ('name = "x"\ninstance = "nope"\nkind = "http"\npath = "/"\nrequests = 1', "instance: unknown value 'nope'"),
        ('name = "x"\ninstance = "one"\nkind = "htp"\npath = "/"\nrequests = 1', "did you mean 'http'"),
        ('name = "x"\ninstance = "one"\nkind = "command"\nargs = ["a"]', "a 'command' scenario runs against"),
        (
            'name = "x"\ninstance = "one"\nkind = "http"\npath = "/"\nrequests = 1\nrequets = 2',
            "did you mean 'requests'",
        ),
        ('name = "x"\ninstance = "one"\nkind = "http"\nrequests = 1', "'x': path: missing"),
        ('name = "x"\ninstance = "one"\nkind = "http"\npath = "/{nope}"\nrequests = 1', "unknown placeholder {nope}"),
        ('name = "x"\ninstance = "one"\nkind = "http"\npath = "/"\nrequests = 1\nexpect = "403"', "classes of status"),
        ('name = "x"\ninstance = "one"\nkind = "http"\npath = "/"\nrequests = 0', "requests: must be at least 1"),
        ('name = "x y"\ninstance = "one"\nkind = "http"\npath = "/"\nrequests = 1', "must be letters, digits"),
        (
            'name = "x"\ninstance = "one"\nkind = "http"\npath = "/"\nrequests = 1\nrps = 5\none_per_connection = true',
            "rps: a rate and one_per_connection",
        ),
        ('name = "x"\ninstance = "one"\nkind = "http"\npath = "a"\nrequests = 1', "'x': path: 'a' must start with /"),
        (
            'name = "x"\ninstance = "one"\nkind = "handshakes"\npath = "a"\nhandshakes = 1',
            "path: 'a' must start with /",
        ),
        (
            'name = "x"\ninstance = "one"\nkind = "http"\npath = "/"\nrequests = 1\nheaders = ["accept"]',
            "'x': headers: 'accept' is not 'name: value'",
        ),
        (
            'name = "x"\ninstance = "one"\nkind = "http"\nprotocol = "h1"\npath = "/"\nrequests = 1\n'
            'headers = [":method: head"]',
            "'x': headers: HEAD over HTTP/1.1: h2load waits for the body",
        ),
    ],
)
def test_scenario_refusals_name_the_file_table_and_key(tmp_path: Path, scenario: str, fragment: str) -> None:
    path = write(tmp_path, SERVER + "\n[[bench.scenario]]\n" + scenario + "\n")
    with pytest.raises(ConfigError) as caught:
        load_workload(path)
    line = caught.value.line()
    assert fragment in line and str(path) in line and "[bench] [[scenario]]" in line, line
    assert "\n" not in line


@pytest.mark.refuses(
    "unknown-key-nearest-known-one", "no-instance-bench-scenario-table", "two-bench-instance-tables-one-name"
)
def test_bench_instance_refusals(tmp_path: Path) -> None:
    twice = SERVER + '\n[[bench.instance]]\nname = "srv"\nmode = "server"\n'
    with pytest.raises(ConfigError, match="'srv' is used twice"):
        load_workload(write(tmp_path, twice))
    with_phase = SERVER.replace('"{ecdsa_cert}"]\n', '"{ecdsa_cert}"]\nphase = []\n')
    with pytest.raises(ConfigError, match=r"\[bench\] \[\[instance\]\] 'one': phase: unknown key"):
        load_workload(write(tmp_path, with_phase))
    typo = SERVER + '\n[[bench.scenarios]]\nname = "x"\n'
    with pytest.raises(ConfigError, match=r"\[bench\]: scenarios: unknown key.*did you mean 'scenario'"):
        load_workload(write(tmp_path, typo))
    none = SERVER
    with pytest.raises(ConfigError, match=r"\[bench\]: scenario: needs at least one \[\[bench.scenario\]\] table"):
        load_workload(write(tmp_path, none))


@pytest.mark.refuses("command-scenario-too-many-runs")
def test_a_command_scenario_with_too_many_runs_is_refused(tmp_path: Path) -> None:
    scenario = '\n[[bench.scenario]]\nname = "x"\ninstance = "cli"\nkind = "command"\nargs = ["primes", "10"]\n'
    path = write(tmp_path, HELLO.read_text() + scenario + f"runs = {MAX_RUNS + 1}\n")
    with pytest.raises(ConfigError, match=rf"'x': runs: {MAX_RUNS + 1} is too many \(at most {MAX_RUNS}\)"):
        load_workload(path)
    load_workload(write(tmp_path, HELLO.read_text() + scenario + f"runs = {MAX_RUNS}\n"))


@pytest.mark.refuses("two-scenarios-one-name")
def test_two_scenarios_of_one_name_are_refused(tmp_path: Path) -> None:
    scenario = '\n[[bench.scenario]]\nname = "x"\ninstance = "one"\nkind = "http"\npath = "/a"\nrequests = 1\n'
    with pytest.raises(
        ConfigError, match=r"\[\[scenario\]\] 'x': name: 'x' is used twice \(give each scenario its own"
    ):
        load_workload(write(tmp_path, SERVER + scenario + scenario.replace("/a", "/b")))


def test_a_declared_held_out_overrides_the_path_rule(tmp_path: Path) -> None:
    """A 304 of a trained path is held out as the user means it; a trained path declared held out, too; and a new
    query string declared trained. The marking says which rule decided."""
    text = (
        SERVER
        + """
[[bench.scenario]]
name = "declared-out"
instance = "one"
kind = "http"
paths = ["/a", "/b"]
held_out = true
requests = 5

[[bench.scenario]]
name = "declared-in"
instance = "one"
kind = "http"
path = "/a?sort=name"
held_out = false
requests = 5

[[bench.scenario]]
name = "by-path"
instance = "one"
kind = "http"
path = "/a"
requests = 5
"""
    )
    workload = load_workload(write(tmp_path, text))
    marks = {s.name: held_out(s, workload) for s in workload.scenarios}
    assert (marks["declared-out"].status, marks["declared-out"].rule) == ("held-out", "declared")
    assert (marks["declared-in"].status, marks["declared-in"].rule) == ("trained", "declared")
    assert marks["declared-in"].as_json() == {"status": "trained", "trained": 1, "total": 1, "rule": "declared"}
    assert (marks["by-path"].status, marks["by-path"].rule) == ("trained", "paths")
    command = HELLO.read_text() + (
        '\n[[bench.scenario]]\nname = "x"\ninstance = "cli"\nkind = "command"\nargs = ["primes", "10"]\n'
        "held_out = false\n"
    )
    hello = load_workload(write(tmp_path, command))
    mark = held_out(next(s for s in hello.scenarios if s.name == "x"), hello)
    assert (mark.status, mark.rule) == ("trained", "declared")
    trained = next(s for s in hello.scenarios if s.name == "collatz")
    assert held_out(trained, hello).rule == "arguments"


@pytest.mark.refuses("scenario-held-out-not-true-false")
@pytest.mark.parametrize("value", ['"yes"', "1", "[true]"])
def test_a_held_out_that_is_not_true_or_false_is_refused(tmp_path: Path, value: str) -> None:
    scenario = '\n[[bench.scenario]]\nname = "x"\ninstance = "one"\nkind = "http"\npath = "/"\nrequests = 1\n'
    scenario += f"held_out = {value}\n"
    path = write(tmp_path, SERVER + scenario)
    with pytest.raises(ConfigError) as caught:
        load_workload(path)
    line = caught.value.line()
    assert "[bench] [[scenario]] 'x': held_out: expected true or false, got" in line and str(path) in line, line
    assert "\n" not in line
