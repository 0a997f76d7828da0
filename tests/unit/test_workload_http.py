"""Server-mode workloads: what is refused when the file is loaded, before anything starts."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from recipes.errors import ConfigError, TrainingFailed
from recipes.inputs import Table
from recipes.train.http import HttpPhase
from recipes.workload import load_workload
from recipes.workload.fields import MAX_RUNS, parse_connections
from recipes.workload.registry import RESOURCES, ResourceContext

GOOD = """
[workload]
description = "d"

[setup]
certs = ["ecdsa"]
docroot = true
upstream = true

[[instance]]
name = "srv"
mode = "server"
args = ["--config", "{config}"]
config = "http = '127.0.0.1:{http_port}' cert = '{ecdsa_cert}' up = '{upstream}'"

[[instance.phase]]
name = "get"
kind = "http"
path = "/page/a"
requests = 10

[[instance.phase]]
name = "post"
kind = "http"
method = "POST"
body = "{bodies}/form-2k.txt"
path = "/api/a"
requests = 10
expect = "403"
upstream = "down"

[[instance.phase]]
name = "tls"
kind = "handshakes"
handshakes = 10

[[instance]]
name = "again"
mode = "server"
args = ["--config", "{config}"]
phases_from = "srv"
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "w.toml"
    path.write_text(text)
    return path


def test_good_server_workload(tmp_path: Path) -> None:
    workload = load_workload(_write(tmp_path, GOOD))
    assert [kind for kind, _ in workload.resources] == ["certs", "docroot", "upstream"]
    first, second = workload.instances
    assert first.mode == second.mode == "server"
    assert [p.name for p in second.phases] == ["get", "post", "tls"]
    post = first.phases[1]
    assert isinstance(post, HttpPhase)
    assert (post.method, post.expect, post.upstream) == ("POST", "403", "down")


@pytest.mark.refuses(
    "required-key-missing",
    "unknown-value-kind-mode-output-phases-from",
    "integer-below-minimum",
    "unknown-setup-resource",
    "phase-kind-instance-mode-cannot-run",
    "file-no-setup-resource-makes",
    "file-does-not-exist",
    "http-phase-expect-not-ok-any-class",
    "http-phase-gives-path-paths",
    "http-path-does-not-start",
    "handshakes-path-does-not-start",
    "http-phase-without-path",
    "post-phase-without-body-get-phase-one",
    "header-not-name-value",
    "max-mean-body-below-min-mean-body",
    "unknown-certificate-key-type",
    "docroot-not-true-folder-path-names-no",
    "upstream-not-true",
)
@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('kind = "handshakes"', 'kind = "handshake"', r"kind: unknown value 'handshake'.*did you mean 'handshakes'"),
        ('kind = "handshakes"', 'kind = "grpc"', r"kind: unknown value 'grpc'"),
        ("{bodies}/form-2k.txt", "{bodies}/form-3k.txt", r"no file \{bodies\}/form-3k.txt is made by \[setup\]"),
        ("{bodies}/form-2k.txt", "{workload_dir}/nope.bin", r"no file .*/nope.bin"),
        # OSError ENAMETOOLONG of Path.is_file before: a traceback
        ("{bodies}/form-2k.txt", "{workload_dir}/" + "n" * 300, r"no file .*/n{300} \(fix the path"),
        ("docroot = true", 'docroot = "~nosuchuser/site"', r"docroot: no folder .*/~nosuchuser/site \(create it"),
        ("docroot = true", "docrot = true", r"docrot: unknown setup resource.*did you mean 'docroot'"),
        ('certs = ["ecdsa"]', 'certs = ["dsa"]', r"unknown key type 'dsa'"),
        ("upstream = true\n", "\n", r"unknown placeholder \{upstream\}"),
        ("{http_port}", "{htp_port}", r"unknown placeholder \{htp_port\}"),
        ('expect = "403"', 'expect = "40x"', r"expect: '40x' is not ok, any"),
        ('expect = "403"', 'expect = "OK"', r"expect: 'OK' is not ok, any"),
        ('method = "POST"\n', "", r"body: a GET phase sends no body"),
        ('body = "{bodies}/form-2k.txt"\n', "", r"body: a POST phase needs a body file"),
        ('path = "/page/a"', 'path = "page/a"', r"'page/a' must start with /"),
        ("requests = 10", "requests = 0", r"requests: must be at least 1"),
        ('path = "/page/a"\nrequests = 10', "requests = 10", r"path: missing"),
        ('phases_from = "srv"', 'phases_from = "svr"', r"phases_from: unknown value 'svr'.*did you mean 'srv'"),
        ('mode = "server"\nargs', 'mode = "command"\nargs', r"a 'http' phase cannot run in a 'command' instance"),
        ("handshakes = 10", "handshakes = 10\nbatch = 0", r"batch: must be at least 1"),
        ("requests = 10", "requests = 10\nmax_mean_body = -1", r"max_mean_body: must be at least 0"),
        ("requests = 10", "requests = 10\nmin_mean_body = 2.5", r"min_mean_body: expected an integer"),
        (
            "requests = 10",
            "requests = 10\nmin_mean_body = 500\nmax_mean_body = 100",
            r"phase\].*max_mean_body: 100 is below min_mean_body = 500",
        ),
        ("requests = 10", "requests = 10\nmean_body = 100", r"mean_body: unknown key.*'(min|max)_mean_body'"),
        ("docroot = true", "docroot = false", r"docroot: must be true \(or left out\), or the path of a folder"),
        ("docroot = true", 'docroot = "no-such-site"', r"docroot: no folder .*/no-such-site"),
        ("docroot = true", 'docroot = "{work}/site"', r"docroot: '\{work\}/site' is not a folder path"),
        ("docroot = true", "docroot = 3", r"docroot: must be true \(or left out\), or the path .*; got 3"),
        (
            'path = "/page/a"',
            'path = "/page/a"\npaths = ["/page/b"]',
            r"\[\[phase\]\] 'get': paths: give path or paths, not",
        ),
        (
            "handshakes = 10",
            'handshakes = 10\npath = "health"',
            r"\[\[phase\]\] 'tls': path: 'health' must start with /",
        ),
        ("requests = 10", 'requests = 10\nheaders = ["x-a 1"]', r"'get': headers: 'x-a 1' is not 'name: value'"),
        ("requests = 10", 'requests = 10\nheaders = [":path"]', r"'get': headers: ':path' is not 'name: value'"),
        ("upstream = true", "upstream = false", r"\[setup\]: upstream: must be true \(or left out\)"),
    ],
)
def test_refused_before_anything_starts(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert old in GOOD
    with pytest.raises(ConfigError, match=message):
        load_workload(_write(tmp_path, GOOD.replace(old, new, 1)))


@pytest.mark.refuses("phase-needs-setup-resource-not-declared")
def test_dead_upstream_phase_needs_the_upstream(tmp_path: Path) -> None:
    text = GOOD.replace("upstream = true\n", "").replace(" up = '{upstream}'", "")
    with pytest.raises(ConfigError, match=r"phase 'post' needs \[setup\] upstream"):
        load_workload(_write(tmp_path, text))


@pytest.mark.refuses("unknown-placeholder-lone-brace-bad-env-placeholder")
@pytest.mark.parametrize(
    ("old", "new", "told"),
    [
        # a PUT phase's body, as the refusal of a body-less PUT suggests, without [setup] docroot (seen on dufs 0.47.0)
        ("docroot = true\n", "", "{bodies} is made by [setup] docroot = true: add it to the workload's [setup] table"),
        ("upstream = true\n", "", "{upstream} is made by [setup] upstream = true: add it"),
        ("'{ecdsa_cert}'", "'{rsa_cert}'", '{rsa_cert} is made by [setup] certs = ["rsa"]: add it'),
    ],
)
def test_a_setup_placeholder_without_its_setup_line_names_the_line(
    tmp_path: Path, old: str, new: str, told: str
) -> None:
    text = GOOD.replace(old, new, 1).replace('upstream = "down"\n', "" if "upstream" in old else 'upstream = "down"\n')
    with pytest.raises(ConfigError, match=r"unknown placeholder \{") as caught:
        load_workload(_write(tmp_path, text))
    assert told in caught.value.line(), caught.value.line()
    assert "known: " in caught.value.line()


@pytest.mark.refuses("head-over-http1")
def test_head_over_http1_is_refused_and_over_http2_taken(tmp_path: Path) -> None:
    """h2load's HTTP/1.1 client waits for the body a HEAD response's content-length announces (a 4 KiB file of dufs
    0.47.0, or any server): the phase would run out of time. Over HTTP/2 the response's stream ends with its
    headers, and dufs's training phase of 300 HEAD requests took 0.2 s."""
    head = 'requests = 10\nheaders = [":method: HEAD"]'
    text = GOOD.replace("requests = 10", head, 1)
    with pytest.raises(ConfigError) as caught:
        load_workload(_write(tmp_path, text.replace('path = "/page/a"', 'path = "/page/a"\nprotocol = "h1"', 1)))
    assert caught.value.line().endswith(
        "[[phase]] 'get': headers: HEAD over HTTP/1.1: h2load waits for the body the response's content-length "
        'announces, and the requests never complete (send HEAD requests over HTTP/2: protocol = "h2")'
    ), caught.value.line()
    phase = load_workload(_write(tmp_path, text)).instances[0].phases[0]
    assert isinstance(phase, HttpPhase)
    assert (phase.protocol, phase.sent_method) == ("h2", "HEAD")


@pytest.mark.refuses("phase-kind-instance-mode-cannot-run")
def test_http_phase_in_a_command_instance_is_refused(tmp_path: Path) -> None:
    text = """
[workload]
description = "d"
[[instance]]
name = "cli"
[[instance.phase]]
name = "get"
kind = "http"
path = "/"
requests = 1
"""
    with pytest.raises(ConfigError, match=r"a 'http' phase cannot run in a 'command' instance.*mode = 'server'"):
        load_workload(_write(tmp_path, text))


def test_mean_body_limits_are_read(tmp_path: Path) -> None:
    text = GOOD.replace(
        'path = "/page/a"\nrequests = 10', 'path = "/page/a"\nrequests = 10\nmin_mean_body = 0\nmax_mean_body = 900'
    )
    get = load_workload(_write(tmp_path, text)).instances[0].phases[0]
    assert isinstance(get, HttpPhase)
    assert (get.min_mean_body, get.max_mean_body) == (0, 900)
    post = load_workload(_write(tmp_path, GOOD)).instances[0].phases[1]
    assert isinstance(post, HttpPhase)
    assert (post.min_mean_body, post.max_mean_body) == (None, None)


@pytest.mark.parametrize("value", ["site", "{workload_dir}/site", "ABSOLUTE"])
def test_docroot_of_ones_own_folder(tmp_path: Path, value: str) -> None:
    site = tmp_path / "site"
    site.mkdir()
    text = GOOD.replace("docroot = true", f"docroot = {str(site) if value == 'ABSOLUTE' else value!r}")
    text = text.replace('body = "{bodies}/form-2k.txt"', 'body = "{docroot}/form.txt"')  # any name: checked at start
    workload = load_workload(_write(tmp_path, text))
    options = dict(workload.resources)["docroot"]
    assert options.folder == site.resolve()
    # {bodies} is still made; {docroot}/… files are the user's, not the generated ones
    made = RESOURCES["docroot"].files(options)
    assert "{bodies}/form-2k.txt" in made
    assert not any(name.startswith("{docroot}") for name in made)


def test_generated_docroot_lists_its_files(tmp_path: Path) -> None:
    made = RESOURCES["docroot"].files(dict(load_workload(_write(tmp_path, GOOD)).resources)["docroot"])
    assert "{docroot}/index.html" in made
    assert "{bodies}/attack.txt" in made


@pytest.mark.refuses("docroot-folder-gone-start")
def test_a_docroot_folder_gone_at_start_is_refused(tmp_path: Path) -> None:
    """Checked when the workload was loaded, removed before the training starts."""
    site = tmp_path / "site"
    site.mkdir()
    workload = load_workload(_write(tmp_path, GOOD.replace("docroot = true", 'docroot = "site"')))
    options = dict(workload.resources)["docroot"]
    site.rmdir()
    context = ResourceContext(tmp_path / "setup", tmp_path / "logs", {})
    gone = rf"\[setup\] docroot: the folder {site} is gone \(create it again"
    with pytest.raises(TrainingFailed, match=gone), RESOURCES["docroot"].start(options, context):
        pass
    assert not (tmp_path / "setup").exists()


@pytest.mark.refuses("http-phase-too-many-requests")
@pytest.mark.parametrize(
    ("old", "key"),
    [('requests = 10\n\n[[instance.phase]]\nname = "post"', "requests"), ("handshakes = 10", "handshakes")],
)
def test_a_count_past_the_ceiling_is_refused(tmp_path: Path, old: str, key: str) -> None:
    """h2load would refuse a -n past a signed 64-bit number only after the build; any count is held to the runs'
    ceiling when the workload is loaded."""
    too_many = old.replace("10", str(MAX_RUNS + 1), 1)
    with pytest.raises(ConfigError) as caught:
        load_workload(_write(tmp_path, GOOD.replace(old, too_many, 1)))
    assert caught.value.line().endswith(f"{key}: {MAX_RUNS + 1} is too many (at most {MAX_RUNS})"), caught.value.line()
    load_workload(_write(tmp_path, GOOD.replace(old, old.replace("10", str(MAX_RUNS), 1), 1)))


def _with_open_files(limits: tuple[int, int], code: str) -> str:
    """What ``code`` prints, run by a Python whose limit of open files (soft, hard) is ``limits`` (lowered in the
    child alone: the test's own stays as it was)."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parents[2],
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, limits),
    )
    return done.stdout.strip()


_LOAD = """
from pathlib import Path
import recipes.train
from recipes.errors import ConfigError
from recipes.workload import load_workload
try:
    load_workload(Path({path!r}))
    print("loaded")
except ConfigError as error:
    print(error.line())
"""


@pytest.mark.refuses("http-phase-more-connections-than-open")
@pytest.mark.parametrize(
    ("old", "key"),
    [('requests = 10\n\n[[instance.phase]]\nname = "post"', "connections"), ("handshakes = 10", "batch")],
)
def test_connections_at_the_hard_limit_of_open_files_are_refused_at_load(tmp_path: Path, old: str, key: str) -> None:
    """30000 connections under a limit of 20000 against dufs 0.47.0: 10006 errored requests and 6003 5xx answers,
    found by h2load after the whole build; now the file is refused when it is loaded, naming the hard limit. The
    soft one does not refuse: every session raises it to the hard one, which h2load and the server inherit."""
    path = _write(tmp_path, GOOD.replace(old, old.replace("10", f"4000\n{key} = 1024", 1), 1))
    refused = _with_open_files((1024, 1024), _LOAD.format(path=str(path)))
    assert refused.endswith(
        f"{key}: 1024 connections cannot be open at once here: h2load and the server each need a file descriptor "
        f"per connection, and the hard limit of open files (ulimit -Hn) is 1024 (lower {key} well below 1024, or "
        "raise the hard limit)"
    ), refused
    assert _with_open_files((1024, 4096), _LOAD.format(path=str(path))) == "loaded"


def test_a_session_raises_the_open_files_limit_its_children_inherit() -> None:
    """A shell's soft limit of 1024 (the hard one 4096): the session's children (h2load, the server) get 4096."""
    code = (
        "import subprocess; from recipes import procs; print(procs.open_files_to_hard_limit()); "
        "print(subprocess.run(['sh', '-c', 'ulimit -n'], capture_output=True, text=True).stdout.strip())"
    )
    assert _with_open_files((1024, 4096), code).split() == ["4096", "4096"]
    assert _with_open_files((4096, 4096), code).split() == ["4096", "4096"]


@pytest.mark.refuses("http-phase-more-connections-than-ports")
def test_more_connections_than_local_ports_are_refused(tmp_path: Path) -> None:
    """Each of h2load's connections holds a local port: a range of 100 ports (a real file of the kernel's format,
    the one parse_connections reads from /proc) holds 100 connections, not 101."""
    ports = tmp_path / "ip_local_port_range"
    ports.write_text("40000\t40099\n")
    table = Table("w.toml [[phase]] 'get'", {"connections": 101})
    with pytest.raises(ConfigError) as caught:
        parse_connections(table, "connections", 4, port_range=ports)
    assert caught.value.line().endswith(
        f"connections: 101 connections cannot be open at once here: each takes a local port, and {ports} gives 100 "
        "(40000 to 40099) (lower connections to at most 100)"
    ), caught.value.line()
    assert parse_connections(Table("x", {"connections": 100}), "connections", 4, port_range=ports) == 100
    # the machine's own range holds the default
    assert parse_connections(Table("x", {}), "connections", 4) == 4
