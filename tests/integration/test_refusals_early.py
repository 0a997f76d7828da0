"""Refusals made when the plan is made, before anything is built (issue 9): an unsafe profile store, a target
rustc does not know, a carried rustflag that would not survive the per-target variable; and a full disk under
the store, which leaves nothing partial. Real nox, cargo and rustc on copies of the ``hello`` fixture."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from recipes.toolchain import find_profdata, rustc_info, rustc_sysroot
from tests.conftest import Pipeline, assert_ok, assert_refused, clean_env
from tests.faults import fill_up, small_tmpfs

pytestmark = pytest.mark.slow

HOST = "x86_64-unknown-linux-gnu"
VAR = "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS"


def _nothing_built(p: Pipeline) -> None:
    """No build ran: no target dir of the crate, no instrumented build, no cargo log, no profile in the store."""
    assert not (p.crate_dir / "target").exists()
    assert not (p.work / "generate-target").exists()
    logs = p.work / "logs"
    assert not logs.exists() or not [log.name for log in logs.iterdir() if "clean" in log.name or "build" in log.name]
    assert not p.store.exists() or not list(p.store.glob("*.profdata"))


def _report(p: Pipeline) -> dict[str, Any]:
    path = p.work / "report.json"
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    assert isinstance(data, dict)
    return data


# --- the profile store ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("session", ["instrument", "pgo"])
def test_store_in_a_parent_others_may_write_refused_before_the_build(hello: Pipeline, session: str) -> None:
    shared = hello.root / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    hello.store = shared / "store"
    line = assert_refused(hello.nox(session), f"profile store {hello.store} is inside {shared}", "no sticky bit")
    assert f"chmod go-w {shared}" in line
    assert "PGO_PROFILE_STORE" in line
    assert not hello.store.exists()
    _nothing_built(hello)


def test_store_in_a_sticky_parent_is_accepted_at_plan_time(hello: Pipeline) -> None:
    # like /tmp: others may write it, but only the owner may rename or remove what is in it
    sticky = hello.root / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    hello.store = sticky / "store"
    # a rustflag with a space on purpose: the plan gets past the store's check, then stops before any build
    _cargo_config(hello, '[build]\nrustflags = ["--cfg", "x=\\"a b\\""]\n')
    assert_refused(hello.nox("instrument"), "[build] rustflags has the entry")
    _nothing_built(hello)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give the directory away")
@pytest.mark.parametrize("session", ["instrument", "pgo"])
def test_store_under_a_directory_of_another_user_refused_before_the_build(hello: Pipeline, session: str) -> None:
    """Issue 19: its owner could swap the store during the compile and back before the re-hash."""
    theirs = hello.root / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 4242, 4242)
    hello.store = theirs / "store"
    line = assert_refused(
        hello.nox(session),
        f"profile store {hello.store} is inside {theirs} (mode 0755), owned by uid 4242 (no user of that uid), "
        "not by you (uid 0) or root: that user could replace the store and its profiles",
    )
    assert line.endswith(
        f"(chown root {theirs} (as root), or choose a PGO_PROFILE_STORE whose parent directories are all yours or "
        "root's)."
    ), line
    assert not hello.store.exists()
    _nothing_built(hello)


def _work_in_store(p: Pipeline) -> str:
    p.work = p.store / "work"
    return f"the work dir PGO_OUT={p.work} is inside the profile store {p.store}"


def _store_in_work(p: Pipeline) -> str:
    p.store = p.work / "store"
    return f"the profile store {p.store} is inside the work dir PGO_OUT={p.work}"


@pytest.mark.parametrize("make", [_work_in_store, _store_in_work], ids=["work-in-store", "store-in-work"])
def test_work_dir_and_store_inside_one_another_refused_before_the_build(hello: Pipeline, make: Any) -> None:
    # it failed only after the training, with a hint that blamed the user
    said = make(hello)
    line = assert_refused(hello.nox("pgo"), said)
    assert line.endswith(f"{said} (give PGO_OUT and PGO_PROFILE_STORE paths outside one another)."), line
    _nothing_built(hello)
    assert not hello.store.exists()


def _open_store(p: Pipeline) -> str:
    p.store.mkdir(mode=0o700)
    p.store.chmod(0o755)
    return "has mode 0755"


def _symlinked_store(p: Pipeline) -> str:
    real = p.root / "real-store"
    real.mkdir(mode=0o700)
    p.store.symlink_to(real)
    return "is a symlink"


@pytest.mark.parametrize("make", [_open_store, _symlinked_store], ids=["mode-0755", "symlink"])
def test_unsafe_store_refused_before_instrument(hello: Pipeline, make: Any) -> None:
    # these were found only by optimise, after instrument, train and merge had run
    fragment = make(hello)
    assert_refused(hello.nox("instrument"), f"profile store {hello.store} {fragment}")
    _nothing_built(hello)


# --- the target -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "suggestion"),
    [
        ("not-a-triple", "did you mean "),
        ("x86_64-unknown-linux-gun", f"did you mean {HOST}?"),
    ],
)
def test_unknown_target_refused_before_cargo(hello: Pipeline, target: str, suggestion: str) -> None:
    # it used to say only "cargo clean failed"
    line = assert_refused(
        hello.nox("instrument", PGO_TARGET=target), f"PGO_TARGET={target} is not a target this rustc knows"
    )
    assert suggestion in line
    assert "rustc --print target-list" in line
    assert "cargo clean" not in line
    _nothing_built(hello)


# --- carried rustflags ------------------------------------------------------------------------------------


def _cargo_config(p: Pipeline, text: str) -> Path:
    config = p.crate_dir / ".cargo" / "config.toml"
    config.parent.mkdir()
    config.write_text(text)
    return config


def test_carried_build_rustflag_with_a_space_refused_when_planned(hello: Pipeline) -> None:
    # it used to reach rustc as `--cfg x="a` and `b"`: "multiple input filenames provided"
    config = _cargo_config(hello, '[build]\nrustflags = ["--cfg", "x=\\"a b\\""]\n')
    line = assert_refused(hello.nox("pgo"), f"{config} [build] rustflags has the entry", "contains white space")
    assert f"{VAR}, which cargo splits on white space" in line
    assert f"move the rustflags to [target.{HOST}] rustflags" in line
    _nothing_built(hello)


def test_the_hint_works_target_rustflags_with_a_space_and_an_existing_variable(hello: Pipeline) -> None:
    # what the refusal suggests builds, and a CARGO_TARGET_<TRIPLE>_RUSTFLAGS of the user's is kept as it is
    _cargo_config(hello, f'[target.{HOST}]\nrustflags = ["--cfg", "x=\\"a b\\""]\n')
    assert_ok(hello.nox("instrument", **{VAR: "--cfg  hello_config"}))
    log = (hello.work / "logs" / "instrument-build.log").read_text()
    main_line = next(line for line in log.splitlines() if "--crate-name hello_pgo" in line)
    assert "--cfg hello_config" in main_line
    assert "'x=\"a b\"'" in main_line
    assert f"-Cprofile-generate={hello.work / 'profraw'}" in main_line


# --- a full disk under the store ----------------------------------------------------------------------------


def _valid_profile(tmp_path: Path) -> Path:
    """An indexed IR-level profile made by the llvm-profdata of this rustc's LLVM, from a text profile."""
    env = clean_env()
    tool = find_profdata(rustc_info(env), rustc_sysroot(env), env, None)
    text = tmp_path / "p.proftext"
    functions = "".join(
        f"f{i}\n# Func Hash:\n{1000 + i}\n# Num Counters:\n1\n# Counter Values:\n{i + 1}\n\n" for i in range(50)
    )
    text.write_text(f"# IR level Instrumentation Flag\n:ir\n{functions}")
    profile = tmp_path / "given.profdata"
    subprocess.run([str(tool.path), "merge", "-o", str(profile), str(text)], check=True, capture_output=True)
    return profile


def test_full_disk_under_the_store_is_one_line_and_leaves_nothing(hello: Pipeline) -> None:
    profile = _valid_profile(hello.root)
    with small_tmpfs(hello.root / "small", size="64k") as small:
        hello.store = small / "store"
        hello.store.mkdir(mode=0o700)
        fill_up(small)
        proc = hello.nox("optimise", PGO_PROFDATA=str(profile))
        line = assert_refused(proc, f"no space left to write the profile {profile}", f"profile store {hello.store}")
        assert "free space or choose another PGO_PROFILE_STORE" in line
        # no temp file, no half profile, no build, no report entry that claims success
        assert sorted(p.name for p in hello.store.iterdir()) == [".lock"]
        _nothing_built(hello)
        optimise = _report(hello).get("optimise")
        assert optimise is None or "failed" in optimise
