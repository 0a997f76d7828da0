from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from recipes.errors import ConfigError, MissingInput
from recipes.toolchain.cargo.invocation import MESSAGE_FORMAT, build_argv
from recipes.toolchain.cargo.log import (
    built_executable,
    compiler_artifacts,
    crate_identities,
    harness_executables,
    main_crate_calls,
    profile_warnings,
    running_invocations,
    rustc_calls,
)
from recipes.toolchain.cargo.metadata import CrateInfo, crate_info
from tests.conftest import DATA, FIXTURES

MULTI = CrateInfo(
    manifest=Path("/build/multi/Cargo.toml"),
    package="multi-pgo",
    package_dir=Path("/build/multi"),
    bin="multi-pgo",
    crate_names=("multi_pgo",),
    target_directory=Path("/build/multi/target"),
)


def test_rustc_calls_of_a_real_log() -> None:
    # A second build with the same profile compiles only the cleaned package; its dependencies are Fresh.
    text = (DATA / "cargo-optimise-clean.log").read_text()
    assert {c.crate_name for c in rustc_calls(text)} == {"multi_pgo"}
    assert "Fresh numkit" in text
    (main,) = main_crate_calls((DATA / "cargo-optimise-clean.log").read_text(), MULTI)
    assert main.crate_types == ("bin",)
    assert main.target == "x86_64-unknown-linux-gnu"
    assert main.metadata is not None and len(main.metadata) == 16
    assert (main.codegen("profile-use") or "").endswith(".profdata")


def test_crate_identities_only_the_package() -> None:
    identities = crate_identities((DATA / "cargo-optimise-clean.log").read_text(), MULTI)
    assert list(identities) == ["multi_pgo (bin)"]


def test_profile_warnings_missing_real_log() -> None:
    warnings = profile_warnings((DATA / "cargo-optimise-missing.log").read_text())
    assert warnings.missing == 24
    assert warnings.stale == 0
    assert set(warnings.missing_by_crate) == {"numkit", "textkit", "multi_pgo"}


#: two functions of the missing log (multi's numkit, a global and its CFG hash as LLVM printed it)
DIGIT_SUM = "_ZN6numkit14digit_sum_upto17h348949b3083eda8fE"
DIGIT_SUM_HASH = 391331302482175184
GCD_LOCAL = "numkit.5e46d1255d93ae2b-cgu.0;_ZN6numkit3gcd17h244cca0ee42981c0E"


def test_a_partial_profiles_left_out_functions_are_never_run_not_missing() -> None:
    # the whole profile held both with zero counts and the partial one left them out: compiled as unprofiled on
    # purpose, not "without profile data"; a local function's record is <cgu>;<symbol>
    dropped = {DIGIT_SUM: frozenset({DIGIT_SUM_HASH}), GCD_LOCAL: frozenset({146835646621254984})}
    warnings = profile_warnings((DATA / "cargo-optimise-missing.log").read_text(), dropped)
    assert (warnings.missing, warnings.never_run, warnings.stale) == (22, 2, 0)
    assert "numkit" not in warnings.missing_by_crate


def test_a_left_out_function_of_another_cfg_hash_is_stale() -> None:
    # edited since the training: its never-run record's hash is not what this build compiled, so the whole
    # profile judges it stale even though the build never read that record
    dropped = {DIGIT_SUM: frozenset({DIGIT_SUM_HASH + 1})}
    warnings = profile_warnings((DATA / "cargo-optimise-missing.log").read_text(), dropped)
    assert (warnings.missing, warnings.never_run, warnings.stale) == (23, 0, 1)
    assert warnings.stale_examples[0] == (
        "numkit.5e46d1255d93ae2b-cgu.0: changed since the training (its never-run record in the whole profile has "
        f"another CFG hash): {DIGIT_SUM}"
    )


def test_a_local_copy_in_another_cgu_is_never_run_by_its_hash_and_missing_by_another() -> None:
    # captured on minijinja-cli 3.0.5: the instrumented build had local copies of one drop_in_place in cgu.3 and
    # cgu.6 of deser_json5 (each its own CFG hash), the optimised build one in cgu.2; a copy of another hash is
    # not an edit (under the whole profile LLVM would say "no profile data" of it too): missing, not stale
    symbol = "_ZN4core3ptr50drop_in_place$LT$deser_json5..de..Deserializer$GT$17hbac29ddfa1eb2d65E"
    dropped = {f"deser_json5.5dc6cdaed2b1db1d-cgu.6;{symbol}": frozenset({0x08E43D4D0FF4EC00})}
    line = (
        f"warning: deser_json5.5dc6cdaed2b1db1d-cgu.2: no profile data available for function {symbol} "
        "Hash = {} up to 0 count discarded\n"
    )
    same = profile_warnings(line.format(0x08E43D4D0FF4EC00), dropped)
    assert (same.missing, same.never_run, same.stale) == (0, 1, 0)
    other = profile_warnings(line.format(0x08E43D4DA72F672F), dropped)
    assert (other.missing, other.never_run, other.stale) == (1, 0, 0)
    assert other.missing_by_crate == {"deser_json5": 1}


def test_profile_warnings_stale_real_log() -> None:
    warnings = profile_warnings((DATA / "cargo-optimise-stale.log").read_text())
    assert warnings.stale == 2
    assert warnings.missing == 2
    assert "hash mismatch" in warnings.stale_examples[0]


def test_profile_warnings_clean_log() -> None:
    warnings = profile_warnings((DATA / "cargo-optimise-clean.log").read_text())
    assert (warnings.missing, warnings.stale) == (0, 0)


def test_build_argv_always_passes_target_and_same_command() -> None:
    argv = build_argv(
        ("cargo", "zigbuild"),
        crate=MULTI,
        target="x86_64-unknown-linux-gnu.2.28",
        features=("a", "b"),
        locked=True,
        target_dir=Path("/w/gen"),
    )
    assert argv[:2] == ["cargo", "zigbuild"]
    assert argv[argv.index("--target") + 1] == "x86_64-unknown-linux-gnu.2.28"
    assert argv[argv.index("--features") + 1] == "a,b"
    assert "--locked" in argv
    assert argv[argv.index("--target-dir") + 1] == "/w/gen"
    assert argv[-3:] == ["-v", "--color", "never"]


# Captured from `nox -s pgo` on tests/fixtures/described and tests/fixtures/renamed (in /tmp/shapes-run): the
# instrumented build (`-v`) and the optimised build (`-vv`, through the pipeline's RUSTC_WRAPPER).
DESCRIBED_DIR = Path("/tmp/shapes-run/described")
DESCRIBED = CrateInfo(
    manifest=DESCRIBED_DIR / "Cargo.toml",
    package="described-pgo",
    package_dir=DESCRIBED_DIR,
    bin="described-pgo",
    crate_names=("described_pgo", "described_pgo"),
    target_directory=DESCRIBED_DIR / "target",
    sources=(DESCRIBED_DIR / "src/lib.rs", DESCRIBED_DIR / "src/main.rs"),
    workspace_root=DESCRIBED_DIR,
)
RENAMED_DIR = Path("/tmp/shapes-run/renamed")
RENAMED = CrateInfo(
    manifest=RENAMED_DIR / "Cargo.toml",
    package="renamed-pkg",
    package_dir=RENAMED_DIR / "app",
    bin="rnm",
    crate_names=("wordcore", "rnm"),
    target_directory=RENAMED_DIR / "target",
    sources=(RENAMED_DIR / "app/src/lib.rs", RENAMED_DIR / "app/src/main.rs"),
    workspace_root=RENAMED_DIR,
)
DESCRIPTION = """Word statistics from the command line: counts, `longest` words and 'rare' letters.
It says "hello" in three lines,
and ends with a backslash \\ and a tab\tinside.
"""


def _data(name: str) -> str:
    return (DATA / name).read_text()


def test_the_multi_line_log_has_the_shape() -> None:
    # the rustc commands of -vv really span several lines: a line-by-line parser sees none of them whole
    text = _data("cargo-optimise-described.log")
    whole_lines = re.findall(r"^\s*Running `.*`\s*$", text, re.MULTILINE)
    assert not [line for line in whole_lines if "--crate-name described_pgo" in line]
    assert text.count('It says "hello" in three lines,\n') == 4  # build script: compile and run; lib; bin


def test_a_multi_line_description_is_one_rustc_command() -> None:
    text = _data("cargo-optimise-described.log")
    calls = rustc_calls(text)
    assert [c.crate_name for c in calls] == ["build_script_build", "described_pgo", "described_pgo"]
    lib, binary = main_crate_calls(text, DESCRIBED)
    assert (lib.crate_types, binary.crate_types) == (("lib",), ("bin",))
    for call in (lib, binary):
        assert dict(call.env)["CARGO_PKG_DESCRIPTION"] == DESCRIPTION
        assert Path(call.argv[0]).name == "rustc-cap-lints-warn"  # the pipeline's wrapper, then rustc
        assert call.compiler == "rustc"
        assert call.target == "x86_64-unknown-linux-gnu"
        assert (call.codegen("profile-use") or "").startswith("/tmp/shapes-run/store/")
    assert binary.source == "src/main.rs"
    # the build script's own compile has no --target: not the package's crate
    assert calls[0].target is None and calls[0].crate_types == ("bin",)


def test_identities_agree_between_v_and_vv() -> None:
    instrumented = crate_identities(_data("cargo-instrument-described.log"), DESCRIBED)
    optimised = crate_identities(_data("cargo-optimise-described.log"), DESCRIBED)
    assert list(optimised) == ["described_pgo (lib)", "described_pgo (bin)"]
    assert instrumented == optimised
    assert all(len(value) == 16 for value in optimised.values())


def test_build_script_run_and_its_output_are_not_rustc_lines() -> None:
    text = _data("cargo-optimise-described.log")
    programs = [Path(inv.argv[0]).name for inv in running_invocations(text)]
    assert programs == ["rustc-cap-lints-warn", "build-script-build", "rustc-cap-lints-warn", "rustc-cap-lints-warn"]
    invocations = running_invocations(text)
    # line numbers cover the whole command: the description's three lines
    assert [inv.last_line - inv.first_line for inv in invocations] == [3, 3, 3, 3]
    assert text.split("\n")[invocations[1].last_line + 1] == "[described-pgo 0.1.0] cargo:rerun-if-changed=build.rs"


def test_a_package_whose_binary_and_lib_are_named_otherwise_in_a_workspace() -> None:
    for name in ("cargo-instrument-renamed.log", "cargo-optimise-renamed.log"):
        text = _data(name)
        calls = rustc_calls(text)
        assert [c.crate_name for c in calls] == ["renamed_macros", "wordcore", "rnm"], name
        macro = calls[0]
        assert macro.crate_types == ("proc-macro",) and macro.target is None
        assert [c.source for c in calls] == ["macros/src/lib.rs", "app/src/lib.rs", "app/src/main.rs"]
        assert main_crate_calls(text, RENAMED)[-1].crate_name == "rnm"
    assert crate_identities(_data("cargo-instrument-renamed.log"), RENAMED) == crate_identities(
        _data("cargo-optimise-renamed.log"), RENAMED
    )
    assert list(crate_identities(_data("cargo-optimise-renamed.log"), RENAMED)) == ["wordcore (lib)", "rnm (bin)"]


def test_a_crate_of_the_same_name_from_another_source_is_not_the_package() -> None:
    # another workspace member (or a registry crate) may have a crate named like the package's: its file differs
    text = _data("cargo-optimise-renamed.log")
    elsewhere = CrateInfo(**{**RENAMED.__dict__, "sources": (RENAMED_DIR / "other/src/lib.rs",)})
    assert main_crate_calls(text, elsewhere) == []
    # without known sources (a CrateInfo built by hand) the crate names alone decide, as before
    by_name = CrateInfo(**{**RENAMED.__dict__, "sources": ()})
    assert [c.crate_name for c in main_crate_calls(text, by_name)] == ["wordcore", "rnm"]


def test_profile_warnings_inside_a_command_are_not_counted() -> None:
    text = _data("cargo-optimise-described.log")
    fake = "warning: described_pgo.cgu.0: no profile data available for function f"
    inside = text.replace('It says "hello" in three lines,\n', f'It says "hello" in three lines,\n{fake}\n')
    assert inside != text
    assert len(rustc_calls(inside)) == 3
    assert profile_warnings(inside).missing == 0
    assert profile_warnings(inside + fake + "\n").missing == 1


QUOTING = """\
     Running `A='it'\\''s' B="say \\"hi\\" to `them`" C=plain rustc --crate-name q 'a b.rs' --crate-type=lib --target x`
     Running `/bin/rustc --crate-name truncated src/lib.rs
   Compiling next v0.1.0
     Running `/bin/rustc --crate-name unbalanced 'src/lib.rs`
     Running `/bin/rustc --crate-name after\\ space src/main.rs --crate-type bin`
"""


def test_any_quoting_and_broken_lines() -> None:
    invocations = running_invocations(QUOTING)
    assert [inv.first_line for inv in invocations] == [0, 4]
    first = invocations[0]
    assert first.env == (("A", "it's"), ("B", 'say "hi" to `them`'), ("C", "plain"))
    assert first.argv == ("rustc", "--crate-name", "q", "a b.rs", "--crate-type=lib", "--target", "x")
    calls = rustc_calls(QUOTING)
    assert [(c.crate_name, c.crate_types, c.target) for c in calls] == [
        ("q", ("lib",), "x"),
        ("after space", ("bin",), None),
    ]


@pytest.mark.refuses("workspace-no-pgo-package", "package-has-several-binaries-no-pgo-bin")
def test_crate_info_of_a_workspace_whose_binaries_are_named_otherwise() -> None:
    # real `cargo metadata` on the fixture: a virtual workspace, two binaries, a lib named `wordcore`
    manifest = FIXTURES / "renamed" / "Cargo.toml"
    with pytest.raises(ConfigError, match="is a workspace: which package"):
        crate_info(manifest, None, None, os.environ)
    with pytest.raises(ConfigError, match=r"package renamed-pkg has 2 binaries \(rnm, rnm-aux\)"):
        crate_info(manifest, "renamed-pkg", None, os.environ)
    info = crate_info(manifest, "renamed-pkg", "rnm", os.environ)
    assert info.crate_names == ("wordcore", "rnm")
    assert info.package_dir == FIXTURES / "renamed" / "app"
    assert info.workspace_root == FIXTURES / "renamed"
    assert info.sources == (info.package_dir / "src" / "lib.rs", info.package_dir / "src" / "main.rs")


@pytest.mark.refuses(
    "no-cargo-toml-manifest-path", "pgo-package-names-no-package-workspace", "pgo-bin-names-no-binary-package"
)
def test_crate_info_refuses_a_package_or_binary_the_manifest_does_not_have(tmp_path: Path) -> None:
    with pytest.raises(MissingInput, match=rf"no Cargo.toml at {tmp_path / 'Cargo.toml'} \(set PGO_MANIFEST"):
        crate_info(tmp_path / "Cargo.toml", None, None, os.environ)
    manifest = FIXTURES / "renamed" / "Cargo.toml"
    with pytest.raises(
        ConfigError, match=r"no package 'renamed' in .*renamed/Cargo.toml \(known packages: .*renamed-pkg"
    ):
        crate_info(manifest, "renamed", None, os.environ)
    with pytest.raises(ConfigError, match=r"package renamed-pkg has no binary 'app' \(its binaries: rnm, rnm-aux\)"):
        crate_info(manifest, "renamed-pkg", "app", os.environ)


# `--message-format=json…` on the fixtures (copies in /tmp/shapes-try): the optimised build of `described` with
# `renamed`'s profile (so every function of it lacks profile data), in `json-render-diagnostics` and in `json`
# (no rendered text), the same build as text, and `renamed` built as the pipeline builds it.
TRY_DESCRIBED = CrateInfo(
    **{
        **DESCRIBED.__dict__,
        "sources": (Path("/tmp/shapes-try/described/src/lib.rs"), Path("/tmp/shapes-try/described/src/main.rs")),
        "workspace_root": Path("/tmp/shapes-try/described"),
    }
)
TRY_RENAMED = CrateInfo(
    **{
        **RENAMED.__dict__,
        "sources": (Path("/tmp/shapes-try/renamed/app/src/lib.rs"), Path("/tmp/shapes-try/renamed/app/src/main.rs")),
        "workspace_root": Path("/tmp/shapes-try/renamed"),
    }
)


def test_profile_warnings_are_the_same_in_text_and_json() -> None:
    counts = {
        name: profile_warnings(_data(name))
        for name in (
            "cargo-optimise-described-missing.log",
            "cargo-optimise-json-render.log",
            "cargo-optimise-json.log",
        )
    }
    assert not re.search(r"^warning: ", _data("cargo-optimise-json.log"), re.MULTILINE)  # only JSON there
    for warnings in counts.values():
        assert warnings.missing == 16
        assert warnings.stale == 0
        assert warnings.missing_by_crate == {"described_pgo": 16}


def test_the_text_parsers_read_a_log_with_json_messages() -> None:
    for name in ("cargo-optimise-json-render.log", "cargo-optimise-json.log"):
        text = _data(name)
        assert [c.crate_name for c in rustc_calls(text)] == ["build_script_build", "described_pgo", "described_pgo"]
        assert list(crate_identities(text, TRY_DESCRIBED)) == ["described_pgo (lib)", "described_pgo (bin)"]
    assert list(crate_identities(_data("cargo-build-renamed-json.log"), TRY_RENAMED)) == ["wordcore (lib)", "rnm (bin)"]


def test_compiler_artifacts_say_what_was_built_and_where() -> None:
    artifacts = compiler_artifacts(_data("cargo-build-renamed-json.log"))
    assert [(a.target_name, a.kinds) for a in artifacts] == [
        ("renamed_macros", ("proc-macro",)),
        ("wordcore", ("lib",)),
        ("rnm", ("bin",)),
    ]
    assert artifacts[2].package_id.endswith("#renamed-pkg@0.1.0")
    expected = Path("/tmp/shapes-try/renamed/target/x86_64-unknown-linux-gnu/release/rnm")
    assert built_executable(_data("cargo-build-renamed-json.log"), TRY_RENAMED) == expected
    # the text log has no JSON: no answer rather than a guess
    assert built_executable(_data("cargo-optimise-renamed.log"), RENAMED) is None
    # another package's binary of that name is not the package's
    elsewhere = CrateInfo(**{**TRY_RENAMED.__dict__, "sources": (Path("/elsewhere/src/main.rs"),)})
    assert built_executable(_data("cargo-build-renamed-json.log"), elsewhere) is None


def test_harness_executables_of_cargo_test() -> None:
    harnesses = harness_executables(_data("cargo-test-buildscript-json.log"))
    # cargo's target names: the bin's harness, the lib's, the integration test
    assert [name for name, _ in harnesses] == ["described-pgo", "described_pgo", "cli"]
    assert all(path.parent.name == "deps" for _, path in harnesses)


def test_build_argv_with_json_messages() -> None:
    argv = build_argv(
        ("cargo", "build"),
        crate=RENAMED,
        target="x86_64-unknown-linux-gnu",
        features=(),
        locked=False,
        target_dir=None,
        verbose="-vv",
        message_format=MESSAGE_FORMAT,
    )
    assert argv[argv.index("-p") + 1 : argv.index("-p") + 4] == ["renamed-pkg", "--bin", "rnm"]
    assert argv[-4:] == ["-vv", "--color", "never", "--message-format=json-render-diagnostics"]
