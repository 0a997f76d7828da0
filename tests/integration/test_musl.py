"""``x86_64-unknown-linux-musl`` end to end on the hello fixture: the instrumented musl binary trains on this
machine, ``nox -s release -- v1.0.0 --target x86_64-unknown-linux-musl`` writes static plain and PGO
artefacts (no glibc ceiling applies: a static binary needs none), and ``nox -s rebuild`` gives the published
PGO binary byte for byte."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from recipes.errors import CheckFailed
from recipes.llvm import elf
from recipes.report import load as load_report
from recipes.stages.summary import summary_lines
from recipes.store import sha256_file
from tests.conftest import assert_ok, run_nox
from tests.integration.test_release import TAG, Release, _binary

MUSL = "x86_64-unknown-linux-musl"
BASE = f"hello-pgo-{TAG}-{MUSL}"


def _musl_installed() -> bool:
    done = subprocess.run(["rustup", "target", "list", "--installed"], capture_output=True, text=True, check=False)
    return MUSL in done.stdout.split()


#: the tests that build for musl (here and in test_release_matrix.py) need its target
NEEDS_MUSL = pytest.mark.skipif(
    shutil.which("rustup") is None or not _musl_installed(),
    reason=f"the {MUSL} target is not installed (rustup target add {MUSL}; .ci/run does)",
)
pytestmark = [pytest.mark.slow, NEEDS_MUSL]


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Release:
    """A musl release; PGO_MAX_GLIBC is set as a glibc release sets it, and must not refuse a static binary."""
    return Release.new(tmp_path_factory.mktemp("musl")).made("--target", MUSL, PGO_MAX_GLIBC="2.17")


def _readelf(path: Path, option: str) -> str:
    return subprocess.run(["readelf", option, "--wide", str(path)], capture_output=True, text=True, check=True).stdout


def test_musl_release_writes_static_artefacts(released: Release, tmp_path: Path) -> None:
    manifest = json.loads((released.dist / f"{BASE}-manifest.json").read_text())
    assert manifest["target"] == manifest["triple"] == MUSL
    assert {p.name for p in released.dist.iterdir()} >= {f"{BASE}.tar.gz", f"{BASE}-pgo.tar.gz", f"{BASE}-pgo.profdata"}
    subprocess.run(
        ["sha256sum", "--check", "--strict", "SHA256SUMS"], cwd=released.dist, check=True, capture_output=True
    )
    assert manifest["libc"] == "static, needs no glibc" and manifest["max_glibc"] is None
    assert "the plain and the PGO binary are both static, needs no glibc" in released.text
    assert f"nox >   {MUSL}: both binaries static, needs no glibc" in released.text
    verified = assert_ok(run_nox("verify", released.env(), [TAG]))
    assert f"verified {TAG}: 7 files, 3 provenance statements" in verified
    # the instrumented musl binary ran the workload here: a profile with the crate's functions, used by the build
    report = json.loads((released.work / "report.json").read_text())
    assert report["merge"]["executed_functions"] >= 5
    assert report["optimise"]["libc"] == "static, needs no glibc"
    optimise_line = next(line for line in summary_lines(load_report(released.work)) if line.startswith("optimise "))
    assert optimise_line.endswith("stale; static, needs no glibc"), optimise_line  # not "glibc none"
    assert manifest["pgo_build"]["stale_profile_warnings"] == 0
    optimise_log = (released.work / "logs" / "optimise-build.log").read_text()
    assert f"--target {MUSL}" in optimise_log and "-Cprofile-use=" in optimise_log
    plain = _binary(released.dist / f"{BASE}.tar.gz", BASE)
    pgo = _binary(released.dist / f"{BASE}-pgo.tar.gz", f"{BASE}-pgo")
    assert plain != pgo
    for label, data in (("plain", plain), ("pgo", pgo)):
        path = tmp_path / label
        path.write_bytes(data)
        path.chmod(0o755)
        # readelf is the witness: no interpreter, no needed library, no GLIBC version-need
        assert "INTERP" not in _readelf(path, "--program-headers")
        assert "(NEEDED)" not in _readelf(path, "--dynamic")
        assert "GLIBC_" not in _readelf(path, "--version-info")
        assert elf.is_static(path) and elf.libc_needs(path) == "static, needs no glibc"
        ran = subprocess.run([path, "primes", "100"], capture_output=True, text=True, check=True)
        assert ran.stdout.strip() == "primes: 25"


def test_musl_pgo_binary_rebuilt_byte_for_byte(released: Release, tmp_path: Path) -> None:
    download = released.download(tmp_path / "download")
    proc = run_nox("rebuild", released.env(PGO_OUT=str(tmp_path / "work")), [TAG, "--artefacts", str(download)])
    text = assert_ok(proc)
    pgo = json.loads((download / f"{BASE}-manifest.json").read_text())["artefacts"]["pgo"]
    assert f"match     {pgo['file']}  rebuilt {pgo['sha256']}" in text
    assert f"match     {pgo['binary']}  rebuilt {pgo['binary_sha256']}" in text and "mismatch" not in text
    rebuilt = tmp_path / "work" / "rebuild" / TAG / "stripped" / "hello-pgo"
    assert sha256_file(rebuilt) == pgo["binary_sha256"]
    assert f"--target {MUSL}" in (tmp_path / "work" / "rebuild" / TAG / "logs" / "optimise-build.log").read_text()


@pytest.mark.refuses("one-artefact-static-other-dynamic")
def test_musl_and_glibc_artefacts_refused_as_a_pair(released: Release, tmp_path: Path) -> None:
    """A static and a dynamic binary are not the same build: the release's same-libc check names both."""
    static = tmp_path / "static"
    static.write_bytes(_binary(released.dist / f"{BASE}-pgo.tar.gz", f"{BASE}-pgo"))
    source = tmp_path / "dyn.c"
    source.write_text('#include <stdio.h>\nint main(void) { puts("hi"); return 0; }\n')
    dynamic = tmp_path / "dynamic"
    subprocess.run(["gcc", "-o", str(dynamic), str(source)], check=True)
    assert elf.check_same_libc(static, static) == "static, needs no glibc"
    with pytest.raises(
        CheckFailed, match=r"the PGO static is static, needs no glibc and the plain dynamic is glibc 2\."
    ):
        elf.check_same_libc(dynamic, static)
