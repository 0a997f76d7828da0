"""The posargs of each release session: what each accepts, in which order, and the one-line refusals."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from recipes.errors import ConfigError
from recipes.release.args import (
    DeterminismArgs,
    RebuildArgs,
    ReleaseArgs,
    VerifyArgs,
    parse_determinism,
    parse_rebuild,
    parse_release,
    parse_verify,
)
from recipes.release.reproducible.tags import Option, take_options

GNU = "x86_64-unknown-linux-gnu"
MUSL = "x86_64-unknown-linux-musl"


def test_release_takes_the_tag_artefacts_targets_and_leaves_config_options() -> None:
    args = parse_release(["v1.2.3", "--target", GNU, "--min-functions", "3", "--artefacts=out", f"--target={MUSL}"])
    assert args == ReleaseArgs("v1.2.3", Path("out").absolute(), (GNU, MUSL), None, ("--min-functions", "3"))
    assert parse_release(["v1.2.3"]) == ReleaseArgs("v1.2.3", None, (), None, ())


def test_release_gather_takes_folders_and_no_other_option() -> None:
    args = parse_release(["v1.2.3", "--gather", "a", "b", "--artefacts", "out"])
    assert args == ReleaseArgs("v1.2.3", Path("out").absolute(), (), (Path("a"), Path("b")), ())
    with pytest.raises(ConfigError, match="--gather joins folders: --target is not an option of it"):
        parse_release(["v1.2.3", "--gather", "a", "--target", GNU])
    with pytest.raises(ConfigError, match="--gather joins folders: --min-functions is not an option of it"):
        parse_release(["v1.2.3", "--gather", "a", "--min-functions", "3"])


@pytest.mark.parametrize("parse", [parse_release, parse_rebuild, parse_verify])
def test_every_release_session_but_determinism_needs_a_tag_first(parse: Callable[[Sequence[str]], object]) -> None:
    with pytest.raises(ConfigError, match="needs a release tag first"):
        parse(["--artefacts", "x"])
    with pytest.raises(ConfigError, match="is not a release tag"):
        parse(["1.2.3"])
    with pytest.raises(ConfigError, match="--artefacts needs a value"):
        parse(["v1.2.3", "--artefacts"])


def test_rebuild_leaves_options_it_does_not_know_to_the_configuration() -> None:
    args = parse_rebuild(["v1.2.3", "--artefacts", "d", "--target", GNU, "--gather", "a", "--rebuild"])
    assert args == RebuildArgs("v1.2.3", Path("d").absolute(), (GNU,), ("--gather", "a", "--rebuild"))


def test_verify_rebuild_and_its_targets() -> None:
    assert parse_verify(["v1.2.3"]) == VerifyArgs("v1.2.3", None, False, (), ())
    args = parse_verify(["v1.2.3", "--rebuild", "--target", GNU, "--min-functions", "3"])
    assert args == VerifyArgs("v1.2.3", None, True, (GNU,), ("--min-functions", "3"))
    with pytest.raises(ConfigError, match="--target picks the targets verify --rebuild rebuilds"):
        parse_verify(["v1.2.3", "--target", GNU])


def test_determinism_hands_every_argument_to_the_configuration() -> None:
    assert parse_determinism(["--target", GNU, "--min-functions", "3"]) == DeterminismArgs(
        ("--target", GNU, "--min-functions", "3")
    )


def test_one_parser_takes_every_kind_of_option_and_leaves_the_rest_in_order() -> None:
    options: tuple[Option, ...] = (Option("--artefacts"), Option("--target", "all"), Option("--gather", "folders"))
    options += (Option("--rebuild", "flag"),)
    argv = ["--min-functions", "3", "--target", GNU, "--gather", "a", "b", "--target-cpu=native",
            f"--target={MUSL}", "--rebuild", "--artefacts=d", "--train-scale", "2"]  # fmt: skip
    taken, rest = take_options(argv, *options)
    assert taken.values == {"--artefacts": "d", "--target": [GNU, MUSL], "--gather": ["a", "b"], "--rebuild": True}
    # no prefix (--target-cpu is not --target): the configuration's
    assert rest == ["--min-functions", "3", "--target-cpu=native", "--train-scale", "2"]
    taken, rest = take_options([], *options)
    assert taken.values == {"--artefacts": None, "--target": [], "--gather": None, "--rebuild": False}
    assert rest == []


@pytest.mark.refuses("session-option-abbreviated")
@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--artefacts"], "--artefacts needs a value"),
        (["--artefacts="], "--artefacts needs a value"),
        (["--target", "--rebuild"], "--target needs a target triple (write --target TRIPLE)"),
        (["--target="], "--target needs a target triple"),
        (["--gather", "--rebuild"], "--gather needs at least one folder"),
        (["--gather", "a", "--gather", "b"], "--gather is given twice"),
        (["--art", "d"], "--art is an abbreviation of --artefacts (write --artefacts whole)"),
        (["--ta=x"], "--ta is an abbreviation of --target (write --target whole)"),
    ],
)
def test_one_parser_refuses_an_option_without_its_value_in_one_line(argv: list[str], words: str) -> None:
    options = (
        Option("--artefacts"),
        Option("--target", "all", "a target triple", "write --target TRIPLE"),
        Option("--gather", "folders"),
        Option("--rebuild", "flag"),
    )
    with pytest.raises(ConfigError) as refused:
        take_options(argv, *options)
    assert words in refused.value.line()
    assert "\n" not in refused.value.line()


def test_verify_refuses_a_malformed_base_as_itself_and_a_base_without_rebuild() -> None:
    with pytest.raises(ConfigError, match=r"--base 'x' is not DIR@sha256:<64 hex digits>"):
        parse_verify(["v1.2.3", "--base", "x"])
    with pytest.raises(ConfigError, match="add --rebuild, or leave --base out"):
        parse_verify(["v1.2.3", "--base", f"/layout@sha256:{'a' * 64}"])
    args = parse_verify(["v1.2.3", "--rebuild", "--base", f"/layout@sha256:{'a' * 64}"])
    assert args.base is not None and args.base.digest == f"sha256:{'a' * 64}"


@pytest.mark.refuses("option-without-value")
def test_a_value_given_to_a_flag_is_refused_as_such() -> None:
    # before: '--rebuild needs a value (write --rebuild VALUE)', for an option that takes none
    with pytest.raises(ConfigError, match=r"^--rebuild takes no value \(write --rebuild alone\)$"):
        parse_verify(["v1.2.3", "--rebuild=1"])


@pytest.mark.refuses("path-setting-no-file-can-have")
@pytest.mark.parametrize(
    ("posargs", "message"),
    [
        # OSError ENAMETOOLONG when the folder was first looked at, before: a traceback of verify, image, release
        (["--artefacts", "a" * 300], r"--artefacts: 'a+…' holds a name of 300 bytes, and a file name is at most 255"),
        (["--gather", "g" * 256], r"--gather: 'g+…' holds a name of 256 bytes"),
        (["--artefacts", "~nosuchuser/dist"], r"--artefacts: '~nosuchuser/dist' starts with ~nosuchuser, and there is"),
    ],
)
def test_a_folder_no_file_can_have_is_refused_with_the_arguments(posargs: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_release(["v1.2.3", *posargs])
