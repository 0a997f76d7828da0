"""A workload's ``[[setup.command]]`` run for real: before the training, its output folder a placeholder the phases
use, never counted in the profile (it runs without LLVM_PROFILE_FILE), and a failure said in one line."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from recipes.train.trainer import RunSettings, run_workload
from recipes.workload import load_workload
from tests.conftest import Pipeline, assert_ok, assert_refused, output, written_records

SH = Path("/bin/sh")

#: a generator in the workload's folder, as a crate's corpus maker would be: writes a file into its output folder
#: and the variables it was given
MAKER = """import json, os, sys
out = sys.argv[1]
with open(os.path.join(out, "words.txt"), "w") as f:
    f.write("the quick brown fox\\n" * 100)
with open(os.path.join(out, "env.json"), "w") as f:
    json.dump(dict(os.environ), f)
os.mkdir(os.path.join(out, "made"))
"""


def _workload(folder: Path, setup: str, phases: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "make_corpus.py").write_text(MAKER)
    path = folder / "setup.toml"
    path.write_text(f'[workload]\ndescription = "d"\n\n{setup}\n[[instance]]\nname = "cli"\n\n{phases}')
    return path


CORPUS = """[[setup.command]]
name = "corpus"
args = ["python3", "{workload_dir}/make_corpus.py", "{corpus}"]
output = "corpus"
env = { CORPUS_SEED = "7" }
"""


def test_a_phase_reads_what_the_setup_command_made(tmp_path: Path) -> None:
    phase = '[[instance.phase]]\nname = "read"\nkind = "command"\nargs = ["-c", "grep -c fox {corpus}/words.txt"]\n'
    workload = _workload(tmp_path / "w", CORPUS, phase)
    project = tmp_path / "project"
    project.mkdir()
    settings = RunSettings(
        base_env={"PATH": os.environ["PATH"], "LLVM_PROFILE_FILE": "/nowhere/%p.profraw"},
        scratch=tmp_path / "work" / "train",
        logs=tmp_path / "logs",
        project_dir=project,
    )
    run = run_workload(load_workload(workload), SH, settings)  # sh writes no .profraw: a replay
    assert run.phases[0]["done"] == 1
    corpus = tmp_path / "work" / "train" / "setup" / "outputs" / "corpus"
    env = json.loads((corpus / "env.json").read_text())
    # the training's environment, but not the profile's file: its own, in a folder nothing merges
    setup_profraw = tmp_path / "work" / "train" / "setup" / "setup-profraw"
    assert env["LLVM_PROFILE_FILE"] == str(setup_profraw / "corpus-%m-%p.profraw")
    assert env["CORPUS_SEED"] == "7"
    assert (tmp_path / "logs" / "setup-corpus.log").is_file()
    assert (tmp_path / "logs" / "train-cli-read.log").read_text() == "100\n"  # the phase read the file


#: the hello fixture's training, run in the folder the setup made (the phase cannot start without it)
HELLO_PHASES = """[[instance.phase]]
name = "collatz"
kind = "command"
args = ["collatz", "300"]
runs = 3
cwd = "{corpus}/made"

[[instance.phase]]
name = "primes"
kind = "command"
args = ["primes", "2000"]
runs = 2
"""


@pytest.fixture(scope="module")
def instrumented(tmp_path_factory: pytest.TempPathFactory) -> tuple[Pipeline, Path]:
    """hello instrumented once for the module, with a workload that has a setup step."""
    root = tmp_path_factory.mktemp("setup-hello")
    hello = Pipeline(root, "hello", workload=str(_workload(root / "profiles", CORPUS, HELLO_PHASES)))
    assert_ok(hello.nox("instrument"))
    return hello, Path(written_records(hello.work)["instrument"]["binary"])


def test_the_setup_command_never_enters_the_profile(instrumented: tuple[Pipeline, Path]) -> None:
    """The setup runs the instrumented binary itself: left to its -Cprofile-generate folder it would write a
    default_*.profraw among the training's; it writes into a folder nothing merges, and the training's .profraw are
    its 5 runs', as without a setup."""
    hello, binary = instrumented
    setup = CORPUS + f'\n[[setup.command]]\nname = "itself"\nargs = ["{binary}", "collatz", "30"]\ncwd = "{{corpus}}"\n'
    workload = _workload(hello.root / "itself", setup, HELLO_PHASES)
    text = assert_ok(hello.nox("train", PGO_WORKLOAD=str(workload)))
    assert "pgo: setup: command corpus done in" in text
    train = written_records(hello.work)["train"]
    assert train["profraw_files"] == 5
    assert [p["done"] for p in train["phases"]] == [3, 2]
    assert sorted(p.name for p in (hello.work / "profraw").iterdir()) == sorted(
        p.name for p in (hello.work / "profraw").glob("cli-*.profraw")
    )
    assert len(list(hello.work.rglob("setup-profraw/itself-*.profraw"))) == 1  # it ran, outside the profile


@pytest.mark.refuses("setup-command-fails")
def test_a_failing_setup_command_fails_the_training_in_one_line(instrumented: tuple[Pipeline, Path]) -> None:
    hello, _ = instrumented
    setup = '[[setup.command]]\nname = "corpus"\nargs = ["python3", "-c", "import sys; sys.exit(\'no seed given\')"]\n'
    workload = _workload(hello.root / "failing", setup, HELLO_PHASES.replace('cwd = "{corpus}/made"', ""))
    line = assert_refused(
        hello.nox("train", PGO_WORKLOAD=str(workload)),
        "[setup] command 'corpus' failed with exit code 1: no seed given",
        "setup-corpus.log",
    )
    assert "instance cli" not in line


def test_the_bench_runs_the_setup_command_before_its_scenarios(tmp_path: Path) -> None:
    """The bench's [setup] (started once for its scenarios) runs the command too: {corpus} is filled for the
    scenarios, under the bench's own scratch dir, made afresh each run."""
    from recipes.bench.settings import Settings, started_setup  # noqa: PLC0415  (the bench's, only here)
    from recipes.workdir import BenchDir  # noqa: PLC0415

    phase = '[[instance.phase]]\nname = "read"\nkind = "command"\nargs = ["{corpus}/words.txt"]\n'
    workload = load_workload(_workload(tmp_path / "w", CORPUS, phase))
    out = BenchDir(tmp_path / "bench")
    settings = Settings(
        builds=(),
        scenarios=(),
        trials=1,
        out=out,
        server_core=1,
        load_core=0,
        workload=workload,
        project_dir=tmp_path,
        env={"PATH": os.environ["PATH"]},
    )
    for _ in range(2):
        with started_setup(settings) as setup:
            corpus = Path(setup.values["corpus"])
            assert corpus == out.setup / "outputs" / "corpus"
            assert (corpus / "words.txt").read_text().count("fox") == 100
    assert (out.logs / "setup-corpus.log").is_file()


@pytest.mark.refuses("program-cannot-start")
def test_a_setup_command_that_removes_the_trained_binary_is_one_line(instrumented: tuple[Pipeline, Path]) -> None:
    """The setup moves the instrumented build's folder away (as rm -rf would leave it, but the module's binary is
    put back): the first phase's run of the binary was a FileNotFoundError's traceback."""
    hello, binary = instrumented
    target = hello.work / "generate-target"
    setup = f'[[setup.command]]\nname = "tidy"\nargs = ["mv", "{target}", "{target}.gone"]\n'
    workload = _workload(hello.root / "tidy", setup, HELLO_PHASES.replace('cwd = "{corpus}/made"', ""))
    try:
        proc = hello.nox("train", PGO_WORKLOAD=str(workload))
    finally:
        Path(f"{target}.gone").rename(target)
    assert_refused(proc, f"cannot run {binary}: there is no such file (it was removed, or never made)")


def _gone(pidfile: Path) -> bool:
    """Whether the process whose pid ``pidfile`` holds has ended (a zombie of another parent counts as ended)."""
    pid = int(pidfile.read_text())
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in {"Z", "X"}


#: a setup command that starts a daemon (setsid, its streams closed) and exits at once; the daemon's pid in a file
DAEMON = (
    '[[setup.command]]\nname = "daemon"\nargs = ["sh", "-c", "setsid sh -c \'echo $$ > {pidfile}; exec sleep 1234\' '
    '< /dev/null > /dev/null 2>&1 & sleep 0.5"]\n'
)


@pytest.mark.refuses("setup-command-leaves-processes", "setup-command-out-of-time", "setup-command-writes-profiles")
@pytest.mark.parametrize(
    ("setup", "env", "words"),
    [
        (DAEMON, {}, "[setup] command 'daemon' left 1 process running (pid "),
        (
            '[[setup.command]]\nname = "slow"\nargs = ["sh", "-c", "echo $$ > {pidfile}; exec sleep 600"]\n',
            {"PGO_PHASE_TIMEOUT": "2"},
            "[setup] command 'slow' did not finish within 2 s (killed, with every process it started)",
        ),
        (
            '[[setup.command]]\nname = "writer"\nargs = ["sh", "-c", "echo $$ > {pidfile}; '
            'cp {pidfile} {work}/../profraw/cli-1-2.profraw"]\n',
            {},
            "[setup] command 'writer' wrote {work}/profraw/cli-1-2.profraw into the folder of the training's profiles",
        ),
    ],
)
def test_a_setup_command_is_held_to_the_trainings_rules(
    instrumented: tuple[Pipeline, Path], setup: str, env: dict[str, str], words: str
) -> None:
    """Before, a setup command's setsid daemon outlived the session (and the verify's setup left another), a
    sleeping one hung it with no limit, and a file it wrote into profraw/ was merged as the training's."""
    hello, _ = instrumented
    pidfile = hello.root / "setup.pid"
    pidfile.unlink(missing_ok=True)
    workload = _workload(
        hello.root / "rules",
        setup.replace("{pidfile}", str(pidfile)),
        HELLO_PHASES.replace('cwd = "{corpus}/made"', ""),
    )
    started = time.monotonic()
    proc = hello.nox("train", PGO_WORKLOAD=str(workload), **env)
    assert time.monotonic() - started < 120
    line = assert_refused(proc, words.format(work=hello.work))
    assert "instance cli" not in output(proc)
    assert _gone(pidfile)
    if "left 1 process" in words:
        assert ": sleep); killed them" in line


def test_a_replay_says_what_a_setup_command_left_and_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """verify and the bench replay a built binary: a setup command's daemon is killed and said, the replay goes on."""
    pidfile = tmp_path / "daemon.pid"
    phase = '[[instance.phase]]\nname = "read"\nkind = "command"\nargs = ["-c", "true"]\n'
    workload = _workload(tmp_path / "w", DAEMON.replace("{pidfile}", str(pidfile)), phase)
    settings = RunSettings(
        base_env={"PATH": os.environ["PATH"]}, scratch=tmp_path / "train", logs=tmp_path / "logs", project_dir=tmp_path
    )
    run = run_workload(load_workload(workload), SH, settings)
    assert run.phases[0]["done"] == 1
    assert _gone(pidfile)
    assert "pgo: [setup] command 'daemon' left 1 process running (pid " in capsys.readouterr().err
