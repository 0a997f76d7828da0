from __future__ import annotations

from pathlib import Path

from recipes.cargo import CrateInfo, build_argv, crate_identities, main_bin_call, profile_warnings, rustc_calls
from tests.conftest import DATA

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
    main = main_bin_call((DATA / "cargo-optimise-clean.log").read_text(), MULTI)
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
