from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from recipes import report
from recipes.bench import builds
from recipes.errors import CheckFailed, MissingInput
from recipes.store import sha256_file


def _binary(path: Path, text: str = "#!/bin/sh\necho hi\n") -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def usable_pgo_binary(work: Path) -> Path | None:
    """The work dir's optimised binary, if its last optimise passed and the file is still what it recorded."""
    optimised = builds.usable_pgo_optimised(work)
    return optimised.binary if optimised is not None else None


def test_usable_pgo_binary_only_when_optimise_passed_and_the_file_is_unchanged(tmp_path: Path) -> None:
    work = tmp_path / "work"
    assert usable_pgo_binary(work) is None  # no report
    (work / "optimised").mkdir(parents=True)
    binary = _binary(work / "optimised" / "server")  # the work dir's checked copy
    captured = json.loads((Path(__file__).parent.parent / "data" / "report-demo-server-bolt.json").read_text())
    optimised = {**captured["optimise"], "binary": str(binary), "binary_sha256": sha256_file(binary)}
    report.save(work, {"optimise": optimised})
    assert usable_pgo_binary(work) == binary
    report.save(work, {"optimise": {"binary": str(binary), "binary_sha256": sha256_file(binary), "failed": "x"}})
    assert usable_pgo_binary(work) is None
    report.save(work, {"optimise": optimised})
    _binary(binary, "#!/bin/sh\necho rebuilt\n")
    assert usable_pgo_binary(work) is None


@pytest.mark.refuses("recorded-path-not-the-work-dirs")
def test_an_optimised_binary_outside_the_work_dir_is_refused_not_run(tmp_path: Path) -> None:
    """report.json hand-edited to name another program as the optimised binary: bench refuses it by name."""
    work = tmp_path / "work"
    binary = _binary(tmp_path / "server")
    captured = json.loads((Path(__file__).parent.parent / "data" / "report-demo-server-bolt.json").read_text())
    optimised = {**captured["optimise"], "binary": str(binary), "binary_sha256": sha256_file(binary)}
    report.save(work, {"optimise": optimised})
    own = work / "optimised" / "server"
    with pytest.raises(CheckFailed, match=rf"report.json names {binary} as the optimised binary, not {own}"):
        usable_pgo_binary(work)


def test_frozen_copy(tmp_path: Path) -> None:
    binary = _binary(tmp_path / "server")
    build = builds.frozen_copy(binary, tmp_path / "bin", "PGO")
    assert build.binary == tmp_path / "bin" / "pgo-server"
    assert build.sha256 == sha256_file(binary) and build.origin == str(binary)
    assert os.access(build.binary, os.X_OK)
    assert not list((tmp_path / "bin").glob(".*"))


@pytest.mark.refuses("given-binary-does-not-exist-not-executable")
def test_frozen_copy_refuses(tmp_path: Path) -> None:
    with pytest.raises(MissingInput, match="no such binary"):
        builds.frozen_copy(tmp_path / "nothing", tmp_path / "bin", "plain")
    (tmp_path / "data").write_text("x")
    with pytest.raises(MissingInput, match="not executable"):
        builds.frozen_copy(tmp_path / "data", tmp_path / "bin", "plain")


@pytest.mark.parametrize(
    ("rustflags", "shared"),
    [
        ("-Cprofile-use=/tmp/s/ab.profdata -Cllvm-args=-pgo-warn-missing-function", []),
        (
            "--remap-path-prefix=/a=/b -Cdebuginfo=1 -Cprofile-use=/tmp/s/ab.profdata "
            "-Cllvm-args=-pgo-warn-missing-function",
            ["--remap-path-prefix=/a=/b", "-Cdebuginfo=1"],
        ),
        ("", []),
        # a carried profile's build (PGO_CARRY): LLVM's dumps of what read the profile are no flag of the plain build
        # (ripgrep 15.2.0 from 15.1.0's profile was refused by the bench before)
        (
            "-Csymbol-mangling-version=v0 -Cprofile-use=/tmp/s/ab.profdata -Cllvm-args=-pgo-warn-missing-function "
            "-Cllvm-args=-pgo-view-raw-counts=text",
            ["-Csymbol-mangling-version=v0"],
        ),
    ],
)
def test_shared_flags_drop_only_the_profile(rustflags: str, shared: list[str]) -> None:
    assert builds.shared_flags(rustflags) == shared
