"""recipes/claim.py: the work dir marked, locked, never followed out of, and of one crate (no cargo: the identity
given). The sessions' refusals, made by real sessions, are in tests/integration/test_workdir_claim.py."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from recipes import report
from recipes.claim import ANY_TARGET, CrateIdentity, check_identity, claim, find_link
from recipes.errors import WorkDirError
from recipes.workdir import WorkDir

HELLO = CrateIdentity("/src/hello/Cargo.toml", "hello", "hello-pgo", "x86_64-unknown-linux-gnu", ())
CSYS = CrateIdentity("/src/csys/Cargo.toml", "csys", "csys", "x86_64-unknown-linux-gnu", ("c",))


def test_a_new_work_dir_is_made_marked_and_locked_then_released(tmp_path: Path) -> None:
    work = tmp_path / "a" / "work"
    with claim(work, "optimise") as held:
        assert held.workdir.marker.is_file()
        holder = json.loads(held.workdir.lock.read_text())
        assert holder["pid"] == os.getpid() and holder["session"] == "optimise"
    with claim(work, "train"):  # released when the block ended
        pass


@pytest.mark.refuses("work-dir-in-use")
def test_a_second_session_is_refused_at_once_naming_the_holder(tmp_path: Path) -> None:
    work = tmp_path / "work"
    with claim(work, "optimise"), pytest.raises(WorkDirError) as caught, claim(work, "train"):
        pass
    line = caught.value.line()
    assert f"the work dir {work} is in use by pid {os.getpid()} (nox -s optimise, since " in line
    assert "wait for it to finish, or give this one another PGO_OUT" in line


@pytest.mark.refuses("work-dir-foreign-files")
def test_a_folder_of_someone_elses_files_is_refused_naming_a_few_and_left_as_it_was(tmp_path: Path) -> None:
    work = tmp_path / "mine"
    (work / "profraw").mkdir(parents=True)
    for name in ("notes.txt", "photo.jpg", "thesis.tex", "z.bin"):
        (work / name).write_text(name)
    with pytest.raises(WorkDirError) as caught, claim(work, "pgo"):
        pass
    assert f"PGO_OUT={work} holds files the pipeline did not write (notes.txt, photo.jpg, profraw and 2 more)" in (
        caught.value.line()
    )
    assert sorted(p.name for p in work.iterdir()) == ["notes.txt", "photo.jpg", "profraw", "thesis.tex", "z.bin"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(WorkDirError, match="is not a directory"), claim(tmp_path / "file", "pgo"):
        pass


def test_a_work_dir_of_the_older_layout_is_adopted(tmp_path: Path) -> None:
    """A report.json and no marker: a work dir today's pipeline wrote; it is taken, and marked."""
    work = tmp_path / "work"
    report.save(work, {})
    (work / "logs").mkdir()
    with claim(work, "merge") as held:
        assert held.workdir.marker.is_file()


@pytest.mark.refuses("work-dir-symbolic-link")
@pytest.mark.parametrize(
    "inside",
    # a file three folders down too: the release's baseline-CPU check wrote its log through such a link
    ["logs", "bin", "profraw", "bench/bin", "cpu-baseline/pgo/command.log", "x86_64-unknown-linux-gnu/logs/a/b"],
)
def test_a_symbolic_link_inside_is_refused_naming_it_and_nothing_is_written_through_it(
    tmp_path: Path, inside: str
) -> None:
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    elsewhere.mkdir()
    with claim(work, "pgo"):
        pass
    link = work / inside
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(elsewhere)
    with pytest.raises(WorkDirError) as caught, claim(work, "pgo"):
        pass
    assert f"{link} is a symbolic link (to {elsewhere}), and the pipeline never writes through one" in (
        caught.value.line()
    )
    assert list(elsewhere.iterdir()) == []


@pytest.mark.refuses("work-dir-folder-not-folder")
@pytest.mark.parametrize("name", ["train", "bin", "observed", "optimised", "children", "logs"])
def test_a_file_where_the_pipeline_keeps_a_folder_is_refused(tmp_path: Path, name: str) -> None:
    # before: the session's first mkdir there raised (FileExistsError, NotADirectoryError): a traceback of train
    # (train), optimise (bin, observed, optimised), or a misleading line of merge (logs: "cannot write
    # <bin>.profdata: File exists (free space in PGO_OUT ...)")
    work = tmp_path / "work"
    with claim(work, "pgo"):
        pass
    (work / name).write_text("not a folder")
    with pytest.raises(WorkDirError) as caught, claim(work, "pgo"):
        pass
    assert caught.value.line() == (
        f"{work / name} is not a folder, and the pipeline keeps one there (remove it (the pipeline makes its folders "
        "itself), or give PGO_OUT another folder)"
    )


@pytest.mark.refuses("work-dir-fifo-socket-device")
@pytest.mark.parametrize("inside", ["logs/merge.log", "logs/train-cli-collatz.log", "report.json"])
def test_a_fifo_inside_is_refused_naming_it(tmp_path: Path, inside: str) -> None:
    # a log there was opened for writing before, and the session waited forever for a reader (merge, train)
    work = tmp_path / "work"
    with claim(work, "pgo"):
        pass
    fifo = work / inside
    fifo.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(fifo)
    with pytest.raises(WorkDirError) as caught, claim(work, "pgo"):
        pass
    assert caught.value.line() == (
        f"{fifo} is a fifo, socket or device, and the pipeline writes only files and folders in the work dir "
        "(remove it (the pipeline makes its files itself), or give PGO_OUT another folder)"
    )


def test_links_inside_target_dirs_and_a_workloads_scratch_are_not_looked_for(tmp_path: Path) -> None:
    """Nor in those of a work dir inside it (a release of several targets: one per target, marked)."""
    inner = "x86_64-unknown-linux-gnu"
    (tmp_path / inner).mkdir()
    WorkDir(tmp_path / inner).marker.touch()
    for folder in ("generate-target/x", "train/x", "bench/runs/s/x", "bench/setup/x", "variant-target/v/x"):
        for where in (tmp_path, tmp_path / inner):
            (where / folder).parent.mkdir(parents=True, exist_ok=True)
            (where / folder).symlink_to(tmp_path)
    assert find_link(tmp_path) is None
    (tmp_path / "logs" / "train").mkdir(parents=True)  # a folder named as a scratch, elsewhere: looked inside
    (tmp_path / "logs" / "train" / "x").symlink_to(tmp_path)
    assert find_link(tmp_path) == tmp_path / "logs" / "train" / "x"


@pytest.mark.refuses("work-dir-of-another-crate")
def test_the_identity_is_recorded_on_first_use_and_another_crate_refused_naming_both(tmp_path: Path) -> None:
    work = WorkDir(tmp_path / "work")
    check_identity(work, HELLO)
    assert report.crate_identity(work.root) == HELLO.as_json()
    check_identity(work, HELLO)
    with pytest.raises(WorkDirError) as caught:
        check_identity(work, CSYS)
    line = caught.value.line()
    assert HELLO.describe() in line and CSYS.describe() in line
    assert line.startswith(f"the work dir {work.root} holds the records of hello (bin hello-pgo, /src/hello/Cargo.toml")
    assert "features c)" in line and "give this crate its own PGO_OUT" in line


def test_a_report_without_identity_is_adopted_and_stays_readable(tmp_path: Path) -> None:
    """A report of before the identity was recorded (or a hand-edited identity): this crate's is written in it,
    and report.load (what older readers do) reads it as before."""
    work = tmp_path / "work"
    report.save(work, {"plain": {"failed": "plain did not finish"}})
    check_identity(WorkDir(work), HELLO)
    assert report.crate_identity(work) == HELLO.as_json()
    assert report.load(work).plain is not None
    report.save(work, {report.CRATE: {"manifest": 3}})
    check_identity(WorkDir(work), CSYS)
    assert report.crate_identity(work) == CSYS.as_json()


def test_a_session_that_builds_nothing_takes_the_recorded_target(tmp_path: Path) -> None:
    """cpu-baseline without PGO_TARGET in an aarch64 work dir: the binary's architecture is its own to read."""
    work = WorkDir(tmp_path / "work")
    check_identity(work, replace(HELLO, target=ANY_TARGET))  # nothing recorded: nothing known to record
    assert report.crate_identity(work.root) is None
    check_identity(work, replace(HELLO, target="aarch64-unknown-linux-gnu"))
    check_identity(work, replace(HELLO, target=ANY_TARGET))
    with pytest.raises(WorkDirError, match="not of csys"):
        check_identity(work, replace(CSYS, target=ANY_TARGET))


@pytest.mark.refuses("work-dir-project-folder")
@pytest.mark.parametrize("project", ["noxfile.py", "Cargo.toml", ".git"])
def test_a_projects_folder_is_refused_as_such_not_for_its_links(tmp_path: Path, project: str) -> None:
    # PGO_OUT=<the project's root> used to blame its .nox symlink (a virtualenv's lib64 -> lib)
    (tmp_path / ".nox" / "tests").mkdir(parents=True)
    (tmp_path / ".nox" / "tests" / "lib64").symlink_to("lib")
    (tmp_path / project).mkdir() if project == ".git" else (tmp_path / project).write_text("")
    with pytest.raises(WorkDirError) as caught, claim(tmp_path, "instrument"):
        pass
    assert caught.value.line() == (
        f"PGO_OUT={tmp_path} is a project's folder (it holds {project}): the work dir may not be the project root, "
        "and every stage empties folders of it (give PGO_OUT a folder of its own, such as a new folder beside the "
        "project)"
    )
    assert not WorkDir(tmp_path).marker.exists()


@pytest.mark.refuses("work-dir-report-not-a-file")
def test_a_report_that_is_a_folder_is_refused_saying_what_it_is(tmp_path: Path) -> None:
    # it used to get "cannot write …/report.json: Is a directory (free space in PGO_OUT or choose another)"
    work = tmp_path / "work"
    with claim(work, "pgo"):
        pass
    (work / "report.json").mkdir()
    with pytest.raises(WorkDirError) as caught, claim(work, "instrument"):
        pass
    assert caught.value.line() == (
        f"{work / 'report.json'} is a directory, and the pipeline keeps its report there, a file (remove it (the "
        "pipeline writes the report itself), or give PGO_OUT another folder)"
    )


def test_the_temporaries_of_a_killed_run_are_removed_when_the_work_dir_is_claimed(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # a SIGKILLed merge left .<bin>.profdata.<pid>.tmp in the work dir, for good
    work = tmp_path / "work"
    with claim(work, "merge"):
        pass
    dead = subprocess.Popen(["true"])
    dead.wait()
    alive = subprocess.Popen(["sleep", "30"])
    try:
        names = {
            f".hello-pgo.profdata.{dead.pid}.tmp": False,
            f"shards/main/.main.profdata.{dead.pid}.tmp": False,
            f".report.json.{alive.pid}.tmp": True,  # its writer runs: not ours to remove
            f"train/.scratch.{dead.pid}.tmp": True,  # a workload's scratch: its own files
            f"generate-target/.x.{dead.pid}.tmp": True,  # cargo's
            "notes.tmp": True,
        }
        for name in names:
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_text("half")
        with claim(work, "merge"):
            pass
        assert {name: (work / name).exists() for name in names} == names
        err = capfd.readouterr().err
        assert f"work dir: removed what a killed run left half-written: .hello-pgo.profdata.{dead.pid}.tmp, " in err
    finally:
        alive.kill()
        alive.wait()
