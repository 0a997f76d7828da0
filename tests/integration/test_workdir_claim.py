"""The work dir is the pipeline's (recipes/claim.py), by real sessions: one session at a time (train while optimise
builds), one crate per work dir (bench, cpu-baseline and plain of another crate in hello's), no symbolic link
followed out of it, no folder of someone else's files emptied, only its own records' paths used, and a release whose
work dir or store is its own folder refused before building. One ``nox -s pgo`` of hello is shared by the module;
every other session here is refused before it builds anything."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import Pipeline, assert_ok, assert_refused, clean_env, copy_fixture, output, run_nox, start_nox
from tests.integration.test_release import TAG, make_repo


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Pipeline:
    hello = Pipeline(tmp_path_factory.mktemp("claimed"), "hello")
    assert_ok(hello.nox("pgo", PGO_TRAIN_SCALE="0.2"))
    return hello


@contextmanager
def edited_report(work: Path, stage: str, **values: str) -> Iterator[None]:
    """report.json with ``stage``'s record hand-edited for the block, as it was after."""
    path = work / "report.json"
    before = path.read_text()
    data = json.loads(before)
    data[stage].update(values)
    path.write_text(json.dumps(data))
    try:
        yield
    finally:
        path.write_text(before)


@pytest.mark.refuses("work-dir-in-use")
def test_train_while_optimise_builds_is_refused_naming_optimises_pid(trained: Pipeline, tmp_path: Path) -> None:
    """optimise holds the work dir from its start to its end: its cargo build is made to wait (a cargo first on
    PATH that sleeps before ``cargo build``) so that train certainly starts while it builds."""
    real = shutil.which("cargo")
    assert real
    shim = tmp_path / "slow-bin"
    shim.mkdir()
    (shim / "cargo").write_text(f'#!/bin/sh\n[ "$1" = build ] && sleep 10\nexec {real} "$@"\n')
    (shim / "cargo").chmod(0o755)
    env = trained.env()
    env["PATH"] = f"{shim}:{env['PATH']}"
    optimise = start_nox("optimise", env)
    lock = trained.work / ".pgo-lock"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        holder = json.loads(lock.read_text() or "{}")
        if holder.get("pid") == optimise.pid and holder.get("session") == "optimise":
            break
        assert optimise.poll() is None, optimise.communicate()[0][-3000:]
        time.sleep(0.2)
    else:
        pytest.fail("optimise never took the work-dir lock")
    train = trained.nox("train")
    line = assert_refused(train, f"the work dir {trained.work} is in use by pid {optimise.pid} (nox -s optimise, since")
    assert "one session at a time in a work dir" in line
    text = optimise.communicate(timeout=600)[0]
    assert optimise.returncode == 0, text[-3000:]
    records = json.loads((trained.work / "report.json").read_text())
    assert "failed" not in records["train"] and "failed" not in records["optimise"]  # train never started


@pytest.mark.refuses("work-dir-of-another-crate")
def test_sessions_of_another_crate_in_the_work_dir_are_refused_naming_both(trained: Pipeline, tmp_path: Path) -> None:
    """The issue's case: bench and cpu-baseline of another crate in a work dir hello left compared or recorded
    hello's binary for it. Now each is refused before anything is built, and hello's records stay."""
    crate = json.loads((trained.work / "report.json").read_text())["crate"]
    assert crate == {
        "manifest": str(trained.manifest),
        "package": "hello-pgo",
        "bin": "hello-pgo",
        "target": "x86_64-unknown-linux-gnu",
        "features": [],
    }
    before = (trained.work / "report.json").read_text()
    multi = copy_fixture("multi", tmp_path)
    for session in ("bench", "cpu-baseline", "plain", "optimise", "train", "pgo-test", "determinism"):
        line = assert_refused(
            trained.nox(session, PGO_MANIFEST=str(multi)),
            f"the work dir {trained.work} holds the records of hello-pgo (bin hello-pgo, {trained.manifest}",
            f"not of multi-pgo (bin multi-pgo, {multi}",
            "give this crate its own PGO_OUT",
        )
        assert line.count("features none") == 2, line
    line = assert_refused(trained.nox("merge", PGO_FEATURES="atomics"), "not of hello-pgo (bin hello-pgo")
    assert "features atomics)" in line
    assert (trained.work / "report.json").read_text() == before
    assert not (trained.work / "bench").exists() and not (trained.work / "plain-target").exists()


@pytest.mark.refuses("recorded-path-not-the-work-dirs")
def test_records_naming_files_outside_the_work_dir_are_not_used(trained: Pipeline, tmp_path: Path) -> None:
    """report.json hand-edited: a merged profile outside the work dir (the same bytes), an optimised binary that is
    another program; optimise, cpu-baseline and bench refuse them by name instead of using them."""
    records = json.loads((trained.work / "report.json").read_text())
    profile = Path(records["merge"]["profile"])
    outside = tmp_path / profile.name
    shutil.copy(profile, outside)
    with edited_report(trained.work, "merge", profile=str(outside)):
        assert_refused(
            trained.nox("optimise"), f"report.json names {outside} as the merged profile, not {profile} that merge"
        )
    other = tmp_path / "hello-pgo"
    shutil.copy(shutil.which("true") or "/bin/true", other)
    own = trained.work / "optimised" / "hello-pgo"
    with edited_report(trained.work, "optimise", binary=str(other)):
        for session in ("cpu-baseline", "bench"):
            assert_refused(
                trained.nox(session), f"report.json names {other} as the optimised binary, not {own} that optimise"
            )


@pytest.mark.refuses("work-dir-symbolic-link")
def test_a_symbolic_link_inside_the_work_dir_is_refused_and_nothing_written_through_it(hello: Pipeline) -> None:
    """``<out>/logs`` and ``<out>/bin`` links to folders outside: the logs and the cc wrappers were written there,
    then came a FileExistsError traceback."""
    elsewhere = hello.root / "elsewhere"
    elsewhere.mkdir()
    hello.work.mkdir()
    (hello.work / "bin").symlink_to(elsewhere)
    (hello.work / "logs").symlink_to(elsewhere)
    line = assert_refused(
        hello.nox("instrument"),
        f"{hello.work / 'bin'} is a symbolic link (to {elsewhere}), and the pipeline never writes through one",
    )
    assert "remove the link" in line
    assert list(elsewhere.iterdir()) == []
    assert not (hello.work / "generate-target").exists()


@pytest.mark.refuses("work-dir-foreign-files")
def test_a_work_dir_of_someone_elses_files_is_refused_and_left_whole(hello: Pipeline) -> None:
    """A PGO_OUT that holds the user's files (its profraw/, train/ and verify/ were emptied silently)."""
    for name in ("profraw/keep.profraw", "train/notes.txt", "verify/data.bin", "thesis.tex"):
        (hello.work / name).parent.mkdir(parents=True, exist_ok=True)
        (hello.work / name).write_text(name)
    before = sorted(str(p.relative_to(hello.work)) for p in hello.work.rglob("*"))
    line = assert_refused(
        hello.nox("pgo"), f"PGO_OUT={hello.work} holds files the pipeline did not write (profraw, thesis.tex, train"
    )
    assert "give PGO_OUT a new or empty folder" in line
    assert sorted(str(p.relative_to(hello.work)) for p in hello.work.rglob("*")) == before


@pytest.mark.refuses("work-dir-project-folder")
def test_the_projects_root_as_the_work_dir_is_refused_as_such(hello: Pipeline) -> None:
    """PGO_OUT=<the project's root>, its .nox a virtualenv with a symbolic link: the line blamed the link."""
    (hello.crate_dir / ".nox" / "tests").mkdir(parents=True)
    (hello.crate_dir / ".nox" / "tests" / "lib64").symlink_to("lib")
    line = assert_refused(
        hello.nox("instrument", PGO_OUT=str(hello.crate_dir)),
        f"PGO_OUT={hello.crate_dir} is a project's folder (it holds Cargo.toml): the work dir may not be the project "
        "root",
        "give PGO_OUT a folder of its own",
    )
    assert "symbolic link" not in line
    assert not (hello.crate_dir / "target").exists()


@pytest.mark.refuses("work-dir-report-not-a-file", "pgo-profdata-not-a-regular-file")
def test_a_report_that_is_a_folder_and_a_profile_that_is_a_device_are_said_as_what_they_are(hello: Pipeline) -> None:
    """report.json a folder got a line about free space; PGO_PROFDATA=/dev/null was "no such file"."""
    (hello.work / "report.json").mkdir(parents=True)
    line = assert_refused(hello.nox("instrument"), f"{hello.work / 'report.json'} is a directory, and the pipeline")
    assert "free space" not in line
    (hello.work / "report.json").rmdir()
    line = assert_refused(
        hello.nox("optimise", PGO_PROFDATA="/dev/null"), "PGO_PROFDATA=/dev/null: a character device, not a regular"
    )
    assert not (hello.crate_dir / "target").exists()


@pytest.mark.refuses("release-work-dir-inside-release-folder")
def test_a_release_whose_work_dir_or_store_is_its_folder_is_refused_before_building(tmp_path: Path) -> None:
    """It was built whole, then died with OSError: Directory not empty (and the store's files were left in the
    folder named as the release)."""
    repo = make_repo(tmp_path)
    dist = repo / "dist" / TAG
    env = {"PGO_MANIFEST": str(repo / "hello" / "Cargo.toml"), "PGO_WORKLOAD": "hello"}
    cases = [
        ({"PGO_OUT": str(dist), "PGO_PROFILE_STORE": str(tmp_path / "store")}, [], f"PGO_OUT={dist} is the release"),
        (
            {"PGO_OUT": str(tmp_path / "work"), "PGO_PROFILE_STORE": str(tmp_path / "out" / "store")},
            ["--artefacts", str(tmp_path / "out")],
            f"PGO_PROFILE_STORE={tmp_path / 'out' / 'store'} is inside the release folder {tmp_path / 'out'}",
        ),
    ]
    for extra, posargs, fragment in cases:
        proc = run_nox("release", clean_env({**env, **extra}), [TAG, *posargs])
        assert_refused(proc, fragment, "or give --artefacts another folder")
        assert "Traceback" not in output(proc)
    assert not dist.exists() and not (tmp_path / "out").exists() and not (tmp_path / "work").exists()


@pytest.mark.refuses("release-folder-inside-work-dir-or-store")
def test_a_release_folder_inside_the_work_dir_or_the_store_is_refused_before_building(tmp_path: Path) -> None:
    """The other way round: ``--artefacts <PGO_OUT>/release/<tag>`` (the folder of the stripped binaries) was built
    whole, then died with OSError: Directory not empty; one in the store put the release among its profiles."""
    repo = make_repo(tmp_path)
    work, store = tmp_path / "work", tmp_path / "store"
    env = clean_env(
        {
            "PGO_MANIFEST": str(repo / "hello" / "Cargo.toml"),
            "PGO_WORKLOAD": "hello",
            "PGO_OUT": str(work),
            "PGO_PROFILE_STORE": str(store),
        }
    )
    for folder, variable, path in (
        (work / "release" / TAG, "PGO_OUT", work),
        (store / "dist", "PGO_PROFILE_STORE", store),
    ):
        proc = run_nox("release", env, [TAG, "--artefacts", str(folder)])
        assert_refused(
            proc,
            f"the release folder {folder} is inside {variable}={path}, whose folders the pipeline writes and empties",
            "give --artefacts a folder outside it",
        )
        assert "Traceback" not in output(proc)
    assert not work.exists() and not store.exists()
