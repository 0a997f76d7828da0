"""Each stage's decisions, from a plan fixture and without cargo (as cibuildwheel tests its build steps from their
options): the environment each build gets (the per-target rustflags, never RUSTFLAGS; the C compilers' flags; the
RUSTC shim), which binary train runs and which profile optimise uses and what each refuses before it runs, the
test suite's cargo command, the plain build's link, and the refusals of a stage that would go on from another
toolchain or build."""

from __future__ import annotations

import dataclasses
import hashlib
import shlex
from pathlib import Path
from typing import Any

import pytest

from recipes import report
from recipes.config import load_config
from recipes.errors import CheckFailed, CommandFailed, ConfigError, MissingInput, StoreError
from recipes.llvm import boltlib
from recipes.plan import BuildPlan
from recipes.release.rebuild import determinism_profile
from recipes.results import InstrumentResult, MergeResult, Report
from recipes.stages import pipeline
from recipes.stages.instrument import instrumented_env
from recipes.stages.merge import refuse_other_rustc
from recipes.stages.optimise import _optimised_env, _profile_to_use, check_same_build, target_dir_lock
from recipes.stages.plain import link_flags
from recipes.stages.test import suite_argv
from recipes.stages.train import instrumented_binary
from recipes.toolchain.cargo.metadata import CrateInfo
from recipes.toolchain.cflags import CPlan, Language
from recipes.toolchain.rustc import RustcInfo
from recipes.toolchain.rustflags import RustflagsPlan
from recipes.workload import load_workload
from tests.conftest import stage_names

TRIPLE = "x86_64-unknown-linux-gnu"
VAR = "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS"
#: the flags the crate's .cargo/config.toml sets, which every build keeps before its profile flags
BASE = ("-Ctarget-cpu=x86-64-v2", "-Cforce-frame-pointers=yes")


def _plan(project: Path, environ: dict[str, str] | None = None, *, pyproject: str = "[tool.pgo]\n") -> BuildPlan:
    """A plan as make_plan would make it for a crate ``demo`` in ``project``, without running cargo or rustc."""
    (project / "pyproject.toml").write_text(pyproject)
    environ = {"PATH": "/usr/bin:/bin", **(environ or {})}
    config = load_config(project, environ)
    crate = CrateInfo(
        manifest=project / "Cargo.toml",
        package="demo",
        package_dir=project,
        bin="demo",
        crate_names=("demo",),
        target_directory=project / "target",
    )
    return BuildPlan(
        config=config,
        env=dict(environ),
        rustc=RustcInfo(release="1.95.0", host=TRIPLE, commit_hash="0" * 40, llvm_version="22.1.2"),
        target=TRIPLE,
        crate=crate,
        rustflags=RustflagsPlan(var=VAR, base=BASE, carried_from=(".cargo/config.toml",), config_target_flags=()),
        c=CPlan(TRIPLE, (), "off", env=environ),
        workload=None,
    )


def _instrumented(plan: BuildPlan, **changes: Any) -> InstrumentResult:
    result = InstrumentResult(
        seconds=1.0,
        binary=plan.work / "bin" / "demo-instrumented",
        binary_sha256="0" * 64,
        crate_metadata={},
        cargo_command=list(plan.config.cargo),
        target=plan.target,
        rustflags_var=VAR,
        rustflags=" ".join(BASE),
        carried_rustflags_from=[],
        rustc=plan.rustc.release,
        rustc_llvm=plan.rustc.llvm_version,
        rustc_source="default",
    )
    return dataclasses.replace(result, **changes)


def _merged(profile: Path, sha256: str) -> MergeResult:
    return MergeResult(
        profile=profile,
        profraw_merged=1,
        profraw_dropped={},
        min_functions=1,
        min_functions_set=1,
        min_functions_source="the default",
        min_functions_total=None,
        llvm_profdata=Path("/usr/bin/llvm-profdata"),
        llvm_profdata_version="22.1.2",
        profile_sha256=sha256,
        executed_functions=10,
        total_functions=20,
        seconds=0.5,
    )


def test_the_instrumented_build_gets_the_per_target_variable_with_the_base_flags_first(tmp_path: Path) -> None:
    plan = _plan(tmp_path, {"PGO_OUT": str(tmp_path / "work")})
    env = instrumented_env(plan)
    assert shlex.split(env[VAR]) == [*BASE, f"-Cprofile-generate={plan.profraw_dir}"]
    assert plan.profraw_dir == tmp_path / "work" / "profraw"
    assert "RUSTFLAGS" not in env
    assert env["PATH"] == "/usr/bin:/bin"


def test_the_instrumented_build_links_with_the_generate_linker_when_one_is_set(tmp_path: Path) -> None:
    plan = _plan(tmp_path, pyproject='[tool.pgo]\ngenerate_linker = "clang-22"\n')
    assert shlex.split(instrumented_env(plan)[VAR])[-1] == "-Clinker=clang-22"


def test_a_work_dir_with_a_space_is_refused_before_a_build(tmp_path: Path) -> None:
    plan = _plan(tmp_path, {"PGO_OUT": str(tmp_path / "my work")})
    with pytest.raises(ConfigError, match=f"contains white space, which {VAR} cannot carry"):
        instrumented_env(plan)


def test_the_optimised_build_uses_the_store_s_profile_through_the_shim(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    stored = tmp_path / "store" / f"{'a' * 64}.profdata"
    env = _optimised_env(plan, stored, trained_here=True)
    assert shlex.split(env[VAR]) == [*BASE, f"-Cprofile-use={stored}", "-Cllvm-args=-pgo-warn-missing-function"]
    assert "RUSTFLAGS" not in env
    shim = Path(env["RUSTC"])  # every optimised compile goes through the shim, which records what rustc received
    assert shim.is_file() and shim.is_relative_to(plan.workdir.bin)
    assert plan.workdir.observed("optimise").is_dir()
    assert not any(plan.workdir.observed("optimise").iterdir())  # emptied: no record of an earlier build


def test_the_optimised_build_for_bolt_is_linked_with_its_relocations(tmp_path: Path) -> None:
    plan = _plan(tmp_path, {"PGO_BOLT": "1"})
    stored = tmp_path / "p.profdata"
    assert shlex.split(_optimised_env(plan, stored, trained_here=True)[VAR])[-1] == boltlib.EMIT_RELOCS
    assert link_flags(plan) == [boltlib.EMIT_RELOCS]  # the plain build the bench compares with: the same link
    assert link_flags(_plan(tmp_path)) == []


def test_a_given_profile_is_used_as_it_is_and_a_missing_one_refused(tmp_path: Path) -> None:
    given = tmp_path / "given.profdata"
    given.write_bytes(b"profile")
    plan = _plan(tmp_path, {"PGO_PROFDATA": str(given)})
    assert _profile_to_use(plan, None) == (given, False, None)
    gone = _plan(tmp_path, {"PGO_PROFDATA": str(tmp_path / "gone.profdata")})
    with pytest.raises(MissingInput, match=r"PGO_PROFDATA=.*gone\.profdata: no such file"):
        _profile_to_use(gone, None)


@pytest.mark.refuses("pgo-profdata-not-a-regular-file")
def test_a_given_profile_that_is_no_regular_file_is_said_so(tmp_path: Path) -> None:
    # PGO_PROFDATA=/dev/null said "no such file" here, and "the profile /dev/null is gone" in determinism
    for given, what in (("/dev/null", "a character device"), (str(tmp_path), "a directory")):
        plan = _plan(tmp_path, {"PGO_PROFDATA": given})
        with pytest.raises(MissingInput) as caught:
            _profile_to_use(plan, None)
        assert caught.value.line() == f"PGO_PROFDATA={given}: {what}, not a regular file (give the path of a .profdata)"
        with pytest.raises(MissingInput) as caught:
            determinism_profile(plan.config)
        assert caught.value.line() == f"PGO_PROFDATA={given}: {what}, not a regular file (give the path of a .profdata)"


def test_optimise_uses_only_this_work_dir_s_merge_and_only_as_merge_wrote_it(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    with pytest.raises(MissingInput, match="optimise needs the result of merge"):
        _profile_to_use(plan, None)
    merged = plan.merged_profile
    merged.parent.mkdir(parents=True)
    merged.write_bytes(b"merged")
    digest = hashlib.sha256(b"merged").hexdigest()
    assert _profile_to_use(plan, Report(merge=_merged(merged, digest))) == (merged, True, digest)
    elsewhere = tmp_path / "other.profdata"
    elsewhere.write_bytes(b"merged")
    with pytest.raises(CheckFailed, match=r"not .* that merge writes"):
        _profile_to_use(plan, Report(merge=_merged(elsewhere, digest)))
    merged.write_bytes(b"changed")
    with pytest.raises(StoreError, match="changed since merge wrote it"):
        _profile_to_use(plan, Report(merge=_merged(merged, digest)))
    merged.unlink()
    with pytest.raises(MissingInput, match=r"the merged profile .* is gone"):
        _profile_to_use(plan, Report(merge=_merged(merged, digest)))


def test_merge_refuses_raw_profiles_of_another_rustc(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    refuse_other_rustc(plan, Report(instrument=_instrumented(plan)))  # the same rustc: nothing to say
    refuse_other_rustc(plan, Report())  # no instrumented build recorded: the merge's own check says so
    older = Report(instrument=_instrumented(plan, rustc="1.94.0", rustc_llvm="21.1.8", rustc_source="+1.94.0"))
    with pytest.raises(CheckFailed, match=r"made by rustc 1\.94\.0 \(LLVM 21\.1\.8, \+1\.94\.0\) and merge resolves"):
        refuse_other_rustc(plan, older)
    other_llvm = Report(instrument=_instrumented(plan, rustc_llvm="21.1.8"))
    with pytest.raises(CheckFailed, match=r"LLVM 22\.1\.2"):
        refuse_other_rustc(plan, other_llvm)


def test_optimise_refuses_to_go_on_from_another_cargo_command_or_target(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    check_same_build(_instrumented(plan), plan, earlier="the instrumented build", now="optimise")
    with pytest.raises(CheckFailed, match="both must use the same PGO_CARGO"):
        other = _instrumented(plan, cargo_command=["cargo", "+nightly", "build", "--release"])
        check_same_build(other, plan, earlier="the instrumented build", now="optimise")
    with pytest.raises(CheckFailed, match="use the same PGO_TARGET"):
        other = _instrumented(plan, target="aarch64-unknown-linux-gnu")
        check_same_build(other, plan, earlier="the instrumented build", now="optimise")


def test_the_c_of_build_scripts_gets_clang_and_the_stage_s_profile_flag(tmp_path: Path) -> None:
    clang = Language("C", "CC", "CFLAGS", ("clang-22",), ("cc",), "22.1.2", None)
    gcc_cxx = Language("C++", "CXX", "CXXFLAGS", None, ("c++",), None, "PGO_CXX=0")
    plan = dataclasses.replace(_plan(tmp_path), c=CPlan(TRIPLE, (clang, gcc_cxx), "auto", env={}))
    env = instrumented_env(plan)
    assert env["CFLAGS_x86_64_unknown_linux_gnu"] == f"-fprofile-generate={plan.profraw_dir}"
    wrapper = Path(env["CC_x86_64_unknown_linux_gnu"])  # the target's C compiler: clang, through the wrapper
    assert wrapper.is_relative_to(plan.workdir.bin) and "clang-22" in wrapper.read_text()
    assert "CXX_x86_64_unknown_linux_gnu" not in env  # C++ not profiled: the build's own compiler
    stored = tmp_path / "p.profdata"
    assert _optimised_env(plan, stored, trained_here=True)["CFLAGS_x86_64_unknown_linux_gnu"] == (
        f"-fprofile-use={stored}"
    )


def test_train_runs_only_this_work_dir_s_instrumented_binary_as_instrument_built_it(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    binary = plan.instrumented_binary
    binary.parent.mkdir(parents=True)
    binary.write_bytes(b"\x7fELF instrumented")
    built = _instrumented(plan, binary=binary, binary_sha256=hashlib.sha256(b"\x7fELF instrumented").hexdigest())
    assert instrumented_binary(plan, Report(instrument=built)) == binary
    with pytest.raises(CheckFailed, match=r"not .* that instrument builds"):
        instrumented_binary(plan, Report(instrument=dataclasses.replace(built, binary=tmp_path / "elsewhere")))
    binary.write_bytes(b"\x7fELF rebuilt by someone")
    with pytest.raises(CheckFailed, match="changed since instrument built it"):
        instrumented_binary(plan, Report(instrument=built))
    binary.unlink()
    with pytest.raises(MissingInput, match="is gone"):
        instrumented_binary(plan, Report(instrument=built))
    with pytest.raises(MissingInput, match="train needs the result of instrument"):
        instrumented_binary(plan, None)


def test_the_test_suite_is_built_by_the_same_cargo_command_for_the_same_target_in_its_own_dir(tmp_path: Path) -> None:
    plan = _plan(tmp_path, pyproject='[tool.pgo]\nfeatures = ["tls"]\n')
    argv = suite_argv(plan, plan.workdir.test_target)
    assert argv[:2] == ["cargo", "test"]
    assert "--no-fail-fast" in argv
    assert argv[argv.index("--target") + 1] == TRIPLE
    assert argv[argv.index("--target-dir") + 1] == str(plan.workdir.test_target)
    assert "tls" in argv[argv.index("--features") + 1]


def _chained(plan: BuildPlan, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, object]]:
    """The stages ``pgo`` runs, in order, each with what it was handed (optimise: also whether it replays), each
    stage replaced by one that records the call and returns a stand-in of its result."""
    calls: list[tuple[str, object]] = []

    def stand_in(name: str) -> object:
        def stage(_plan: BuildPlan, **options: object) -> str:
            handed = options.get("handed")
            seen = sorted(stage_names(handed)) if isinstance(handed, Report) else None
            calls.append((name, (seen, options["verify"]) if name == "optimise" else seen))
            return f"{name}'s result"

        return stage

    for name in ("instrument", "train", "merge", "optimise", "test", "bolt"):
        monkeypatch.setattr(pipeline, name, stand_in(name))
    monkeypatch.setattr(report, "load", lambda _work: Report())
    pipeline.pgo(plan)
    return calls


def _with_workload(plan: BuildPlan) -> BuildPlan:
    import recipes.train  # noqa: F401, PLC0415  (registers the phase kinds the workload names)

    return dataclasses.replace(plan, workload=load_workload(Path("profiles/hello.toml").absolute()))


def test_pgo_runs_the_four_stages_in_order_each_handed_the_results_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = _with_workload(_plan(tmp_path))
    assert _chained(plan, monkeypatch) == [
        ("instrument", None),
        ("train", ["instrument"]),
        ("merge", ["instrument", "train"]),
        ("optimise", (["instrument", "merge", "train"], True)),  # a profile trained now: the binary replays it
    ]


def test_pgo_with_a_given_profile_only_optimises_and_asks_for_tests_and_bolt_when_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given = tmp_path / "given.profdata"
    plan = _plan(tmp_path, {"PGO_PROFDATA": str(given), "PGO_TEST": "1", "PGO_BOLT": "1"})
    assert _chained(plan, monkeypatch) == [
        ("optimise", ([], False)),  # nothing trained here: no replay unless PGO_VERIFY asks
        ("test", ["optimise"]),
        ("bolt", ["optimise"]),
    ]


def test_pgo_without_a_workload_is_refused_before_anything_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match=r"no workload file .*profiles/demo\.toml"):
        _chained(_plan(tmp_path), monkeypatch)


@pytest.mark.refuses("optimise-target-dir-lock-not-file")
def test_an_optimise_lock_that_is_not_a_file_is_refused(tmp_path: Path) -> None:
    # a directory there: IsADirectoryError from filelock before, a traceback of nox -s optimise
    (tmp_path / ".pgo-optimise.lock").mkdir()
    with pytest.raises(CommandFailed, match=r"\.pgo-optimise\.lock is not a file, and optimise locks the crate's"):
        target_dir_lock(tmp_path)
    (tmp_path / ".pgo-optimise.lock").rmdir()
    with target_dir_lock(tmp_path):
        assert (tmp_path / ".pgo-optimise.lock").is_file()
