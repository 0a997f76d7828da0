"""Command phases run for real, through the workload runner, with /bin/sh as the "binary": process groups,
output kept or discarded, cwd, {env:NAME}, and errors that name the phase."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from recipes.errors import CommandFailed, ConfigError, TrainingFailed
from recipes.results import WorkloadRun
from recipes.train.command import TAIL_BYTES
from recipes.train.trainer import Collect, RunSettings, run_workload
from recipes.workload import load_workload

SH = Path("/bin/sh")


def _workload(tmp_path: Path, phases: str, instance: str = "") -> Path:
    path = tmp_path / "w.toml"
    path.write_text(f'[workload]\ndescription = "d"\n\n[[instance]]\nname = "cli"\n{instance}\n{phases}')
    return path


def _phase(name: str, script: str, extra: str = "") -> str:
    return f'[[instance.phase]]\nname = "{name}"\nkind = "command"\nargs = ["-c", {script!r}]\n{extra}\n'


def _run(tmp_path: Path, workload: Path, env: dict[str, str] | None = None) -> WorkloadRun:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    settings = RunSettings(
        base_env={"PATH": os.environ["PATH"], **(env or {})},
        scratch=tmp_path / "work" / "verify",
        logs=tmp_path / "logs",
        project_dir=project,
    )
    return run_workload(load_workload(workload), SH, settings)


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for its reaper does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in {"Z", "X"}


def _gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.refuses("command-phase-runs-do-not-finish-time")
def test_a_phase_out_of_time_kills_its_grandchildren(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    script = f"sleep 300 & echo $! > {pid_file}; wait"
    workload = _workload(tmp_path, _phase("spawn", script, "timeout = 1"))
    started = time.monotonic()
    with pytest.raises(TrainingFailed) as caught:
        _run(tmp_path, workload)
    assert time.monotonic() - started < 30
    assert caught.value.line().startswith("phase cli/spawn: only 0 of 1 runs finished within 1 s"), caught.value.line()
    assert "raise the phase's timeout" in caught.value.line()
    grandchild = int(pid_file.read_text())
    assert _gone(grandchild), f"the grandchild sleep {grandchild} still runs"


def test_a_run_that_exits_leaves_nothing_running(tmp_path: Path) -> None:
    """A background process of a run holds its output pipe: it is killed when the run exits, not waited for."""
    pid_file = tmp_path / "grandchild.pid"
    script = f"sleep 300 & echo $! > {pid_file}; echo started"
    started = time.monotonic()
    result = _run(tmp_path, _workload(tmp_path, _phase("detach", script, "runs = 2")))
    assert time.monotonic() - started < 30
    assert result.phases[0]["done"] == 2
    assert _gone(int(pid_file.read_text()))
    assert (tmp_path / "logs" / "train-cli-detach.log").read_text() == "started\nstarted\n"


#: a run that leaves two processes: one in its group, one that left it (setsid, then its parent exits)
#: two sleeps left running, one in a session of its own; the run exits once both are sleep (not a shell yet to exec
#: it, which the leftover line would name)
DAEMONS = (
    "sleep 300 & echo $! > {a}; (setsid sleep 301 & echo $! > {b}) & wait $!; until grep -q . {b}; do :; done; "
    "until grep -qx sleep /proc/$(cat {a})/comm && grep -qx sleep /proc/$(cat {b})/comm; do :; done"
)


def _daemon_phase(tmp_path: Path, runs: int = 1) -> tuple[Path, Path, Path]:
    a, b = tmp_path / "a.pid", tmp_path / "b.pid"
    return _workload(tmp_path, _phase("detach", DAEMONS.format(a=a, b=b), f"runs = {runs}")), a, b


@pytest.mark.refuses("training-command-run-leaves-processes-running-killed")
def test_a_training_run_that_leaves_processes_running_is_refused(tmp_path: Path) -> None:
    workload, a, b = _daemon_phase(tmp_path, runs=3)
    project = tmp_path / "project"
    project.mkdir()
    with pytest.raises(TrainingFailed) as caught:
        settings = RunSettings(
            base_env={"PATH": os.environ["PATH"]},
            scratch=tmp_path / "work" / "train",
            logs=tmp_path / "logs",
            project_dir=project,
        )
        run_workload(load_workload(workload), SH, settings, Collect.profraw(tmp_path / "profraw"))
    pids = sorted(int(f.read_text()) for f in (a, b))
    assert all(_gone(pid) for pid in pids)
    named = ", ".join(f"pid {pid}: sleep" for pid in pids)
    assert caught.value.message == f"phase cli/detach: run 1 of 3 left 2 processes running ({named}); killed them"
    assert caught.value.hint.startswith("a process still running after the program exited could write a .profraw")


def test_a_replayed_run_that_leaves_processes_running_is_one_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    workload, a, b = _daemon_phase(tmp_path)
    result = _run(tmp_path, workload)
    assert result.phases[0]["done"] == 1
    pids = sorted(int(f.read_text()) for f in (a, b))
    assert all(_gone(pid) for pid in pids)
    named = ", ".join(f"pid {pid}: sleep" for pid in pids)
    assert (
        f"pgo: phase cli/detach: its runs left 2 processes running ({named}); killed them\n" in capfd.readouterr().err
    )


def test_output_tail_is_bounded(tmp_path: Path) -> None:
    script = "yes a | head -c 300000; echo END"
    _run(tmp_path, _workload(tmp_path, _phase("loud", script, "runs = 2")))
    log = (tmp_path / "logs" / "train-cli-loud.log").read_bytes()
    total = 2 * (300000 + 4)
    header = f"[{total} bytes of output from 2 runs: the last {TAIL_BYTES} follow]\n".encode()
    assert log.startswith(header), log[:200]
    assert len(log) == len(header) + TAIL_BYTES
    assert log.endswith(b"a\nEND\n")


def test_output_keep_and_discard(tmp_path: Path) -> None:
    script = "yes b | head -c 100000; echo done >&2"
    phases = _phase("kept", script, 'output = "keep"') + _phase("dropped", script, 'output = "discard"')
    _run(tmp_path, _workload(tmp_path, phases))
    kept = (tmp_path / "logs" / "train-cli-kept.log").read_bytes()
    # stdout and stderr are two pipes: stderr's line may land between two chunks of stdout
    assert b"done\n" in kept and kept.replace(b"done\n", b"", 1) == b"b\n" * 50000
    dropped = (tmp_path / "logs" / "train-cli-dropped.log").read_text()
    assert dropped == "[100005 bytes of output from 1 run, discarded]\n"


@pytest.mark.refuses("command-run-exits-another-code-expect-exit")
def test_a_failed_run_names_the_phase_and_keeps_its_tail(tmp_path: Path) -> None:
    phases = _phase("ok", "true") + _phase("grep-words", "echo why; exit 3", "runs = 4")
    with pytest.raises(TrainingFailed) as caught:
        _run(tmp_path, _workload(tmp_path, phases))
    log = tmp_path / "logs" / "train-cli-grep-words.log"
    assert caught.value.line() == f"phase cli/grep-words: run 1 of 4 exited with exit code 3, expected 0 (see {log})"
    assert log.read_text() == "why\n"


@pytest.mark.refuses("command-run-exits-another-code-expect-exit")
@pytest.mark.parametrize("output", ["discard", "tail"])
def test_a_failed_run_keeps_the_end_of_its_stderr_whatever_its_output(tmp_path: Path, output: str) -> None:
    """Megabytes on stdout, the reason on stderr (first, then more of stdout), exit 1: the reason is in the refusal
    and at the end of the log, discarded or not."""
    script = "echo 'early noise' >&2; echo 'Assertion failed: the reason' >&2; yes out | head -c 3000000; exit 1"
    with pytest.raises(TrainingFailed) as caught:
        _run(tmp_path, _workload(tmp_path, _phase("loud", script, f'output = "{output}"')))
    log = tmp_path / "logs" / "train-cli-loud.log"
    assert caught.value.line() == (
        "phase cli/loud: run 1 of 1 exited with exit code 1, expected 0; its stderr ends: Assertion failed: the "
        f"reason (see {log})"
    )
    text = log.read_text()
    assert text.endswith(
        "[the end of run 1's stderr (41 bytes), which failed:]\nearly noise\nAssertion failed: the reason\n"
    ), text[-300:]
    assert len(text) < 70 * 1024  # bounded: megabytes of stdout are not kept


@pytest.mark.refuses("command-run-exits-another-code-expect-exit")
def test_the_stderr_kept_of_a_failed_run_is_bounded(tmp_path: Path) -> None:
    script = "i=0; while [ $i -lt 3000 ]; do echo line-$i >&2; i=$((i+1)); done; exit 2"
    with pytest.raises(TrainingFailed, match=r"its stderr ends: line-2999 \(see"):
        _run(tmp_path, _workload(tmp_path, _phase("chatty", script, 'output = "discard"')))
    text = (tmp_path / "logs" / "train-cli-chatty.log").read_text()
    assert text.startswith("[") and "[the end of run 1's stderr (4096 bytes), which failed:]" in text
    assert text.endswith("line-2999\n") and len(text) < 4096 + 200


def test_cwd_of_the_instance_and_of_a_phase(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "data" / "deeper").mkdir(parents=True)
    phases = (
        _phase("default", "pwd", 'output = "keep"')
        + _phase("relative", "pwd", 'output = "keep"\ncwd = "data/deeper"')
        + _phase("placeholder", "pwd", 'output = "keep"\ncwd = "{work}"')
    )
    _run(tmp_path, _workload(tmp_path, phases, 'cwd = "data"'))
    logs = tmp_path / "logs"
    assert (logs / "train-cli-default.log").read_text() == f"{project / 'data'}\n"
    assert (logs / "train-cli-relative.log").read_text() == f"{project / 'data' / 'deeper'}\n"
    assert (logs / "train-cli-placeholder.log").read_text() == f"{tmp_path / 'work' / 'verify'}\n"


def test_without_cwd_a_run_is_in_the_project(tmp_path: Path) -> None:
    _run(tmp_path, _workload(tmp_path, _phase("where", "pwd", 'output = "keep"')))
    assert (tmp_path / "logs" / "train-cli-where.log").read_text() == f"{tmp_path / 'project'}\n"


@pytest.mark.refuses("cwd-not-directory")
@pytest.mark.parametrize(
    ("instance", "extra", "where"), [('cwd = "nowhere"', "", "instance cli"), ("", 'cwd = "nowhere"', "phase cli/p")]
)
def test_a_missing_cwd_is_one_line(tmp_path: Path, instance: str, extra: str, where: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _run(tmp_path, _workload(tmp_path, _phase("p", "true", extra), instance))
    assert caught.value.line() == (
        f"{where}: cwd {tmp_path / 'project' / 'nowhere'} is not a directory (create it, or fix cwd in the workload)"
    )


@pytest.mark.refuses("cwd-not-directory")
@pytest.mark.parametrize(
    ("cwd", "shown"),
    [
        # RuntimeError of Path.expanduser before: a traceback mid-training
        ("~nosuchuser/data", "~nosuchuser/data"),
        # OSError ENAMETOOLONG of Path.is_dir before (a {env:NAME} may fill in anything)
        ("{env:LONG}", "d" * 300),
    ],
)
def test_a_cwd_no_directory_can_be_is_one_line(tmp_path: Path, cwd: str, shown: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _run(tmp_path, _workload(tmp_path, _phase("p", "true", f"cwd = {cwd!r}")), env={"LONG": "d" * 300})
    assert caught.value.line() == (
        f"phase cli/p: cwd {tmp_path / 'project' / shown} is not a directory (create it, or fix cwd in the workload)"
    )


@pytest.mark.refuses("command-arguments-too-long")
@pytest.mark.parametrize(
    ("phase", "instance"),
    [
        ('args = ["-c", "true", "' + "a" * 200_000 + '"]', ""),
        ('args = ["-c", "true"]', 'env = { BIG = "' + "b" * 200_000 + '" }'),
    ],
    ids=["argument", "variable"],
)
def test_arguments_the_system_will_not_start_a_program_with_are_one_line(
    tmp_path: Path, phase: str, instance: str
) -> None:
    # OSError E2BIG (Argument list too long) from Popen before: a traceback mid-training
    path = tmp_path / "w.toml"
    path.write_text(
        f'[workload]\ndescription = "d"\n\n[[instance]]\nname = "cli"\n{instance}\n'
        f'[[instance.phase]]\nname = "p"\nkind = "command"\n{phase}\n'
    )
    with pytest.raises(CommandFailed, match=r"cannot start sh: its arguments and environment are \d+ bytes, the "):
        _run(tmp_path, path)


@pytest.mark.refuses("env-variable-name-invalid")
@pytest.mark.parametrize("name", ["A=B", ""])
def test_an_env_name_no_process_can_be_given_is_refused(tmp_path: Path, name: str) -> None:
    # ValueError (illegal environment variable name) when the run started, before: a traceback
    with pytest.raises(ConfigError, match=rf"env: {re.escape(repr(name))} is not a variable name"):
        load_workload(_workload(tmp_path, _phase("p", "true"), f'env = {{ {json.dumps(name)} = "x" }}'))


def test_env_placeholder(tmp_path: Path) -> None:
    phase = (
        '[[instance.phase]]\nname = "env"\nkind = "command"\noutput = "keep"\n'
        'args = ["-c", "read x; echo $x $0", "{env:WHO}"]\nstdin = "{env:GREETING}\\n"\n'
    )
    instance = 'env = { WHO = "instance" }\ncwd = "{env:SOMEWHERE}"'
    (tmp_path / "there").mkdir()
    _run(tmp_path, _workload(tmp_path, phase, instance), {"GREETING": "hello", "SOMEWHERE": str(tmp_path / "there")})
    assert (tmp_path / "logs" / "train-cli-env.log").read_text() == "hello instance\n"


@pytest.mark.refuses("env-name-name-not-set-run-time")
def test_an_unset_env_placeholder_is_one_line_before_the_phase_runs(tmp_path: Path) -> None:
    phases = _phase("first", "true") + _phase("needs-key", "true", 'stdin = "{env:API_KEY}"')
    with pytest.raises(ConfigError) as caught:
        _run(tmp_path, _workload(tmp_path, phases))
    assert caught.value.line() == (
        "phase cli/needs-key: {env:API_KEY}: API_KEY is not set in the environment "
        "(export API_KEY=… before running nox, or give it in the instance's env table)"
    )
    assert not (tmp_path / "logs" / "train-cli-needs-key.log").exists()


def test_stdin_the_program_does_not_read(tmp_path: Path) -> None:
    phase = _phase("deaf", "exit 0", f'stdin = "{"x" * 300000}"')
    result = _run(tmp_path, _workload(tmp_path, phase))
    assert result.phases[0]["done"] == 1


@pytest.mark.refuses("command-phase-log-cannot-written")
@pytest.mark.parametrize("output", ["keep", "tail"])
def test_a_log_that_cannot_be_written_is_one_line(tmp_path: Path, output: str) -> None:
    """/dev/full answers every write with ENOSPC, as a full disk does."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "train-cli-full.log").symlink_to("/dev/full")
    workload = _workload(tmp_path, _phase("full", "yes | head -c 200000", f'output = "{output}"'))
    with pytest.raises(TrainingFailed) as caught:
        _run(tmp_path, workload)
    assert caught.value.line() == (
        f"phase cli/full: its log {tmp_path / 'logs' / 'train-cli-full.log'} could not be written: "
        'No space left on device (free space on that filesystem, or set output = "discard" for the phase)'
    )


def test_a_failed_phases_log_does_not_outlive_a_successful_rerun(tmp_path: Path) -> None:
    """#35: the log of a phase that failed stood in logs/ beside the logs of the re-run that passed."""
    failing = _workload(tmp_path, _phase("broken", "echo broken >&2; exit 3"))
    with pytest.raises(TrainingFailed):
        _run(tmp_path, failing)
    assert "broken" in (tmp_path / "logs" / "train-cli-broken.log").read_text()
    (tmp_path / "logs" / "instrument.log").write_text("not a phase's log\n")
    _run(tmp_path, _workload(tmp_path, _phase("fixed", "echo fixed")))
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == ["instrument.log", "train-cli-fixed.log"]


def test_the_progress_lines_count_in_the_singular_for_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """#35: "1 runs of"; and "1 phases"."""
    _run(tmp_path, _workload(tmp_path, _phase("once", "echo once")))
    err = capsys.readouterr().err
    assert "instance cli (command): 1 phase\n" in err
    assert "phase cli/once: 1 run of -c 'echo once' in " in err
    assert "phase cli/once: 1/1 in " in err and " s (1 run exited as expected)" in err
    assert "1 runs" not in err and "1 phases" not in err
