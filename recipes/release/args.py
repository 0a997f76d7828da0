"""The posargs of each release session, parsed once into a typed record: what each session accepts is here.

``nox -s release -- vX.Y.Z [--artefacts DIR] [--target T ...] [config options]``,
``nox -s release -- vX.Y.Z --gather DIR [DIR ...] [--artefacts OUT]``,
``nox -s rebuild -- vX.Y.Z [--artefacts DIR] [--target T ...] [--base DIR@sha256:D] [config options]``,
``nox -s verify -- vX.Y.Z [--artefacts DIR] [--rebuild [--target T ...] [--base DIR@sha256:D]] [config options]``,
``nox -s determinism -- [config options]``,
``nox -s image -- vX.Y.Z [--artefacts DIR] [--source URL] [--base DIR@sha256:D] [config options]``.

The options of the session are taken out first, in that order (the tag, --artefacts, --gather, --target,
--rebuild); what is left is the configuration's (:func:`recipes.config.load_config` refuses what it does not know,
as ``session arguments: unknown argument ...``). A misplaced option is one :class:`ConfigError` line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from recipes.errors import ConfigError
from recipes.release.matrix import TARGET
from recipes.release.reproducible import split_tag, take_option
from recipes.release.reproducible.oci import Base, is_digest
from recipes.release.reproducible.tags import take_all, take_gather

ARTEFACTS = "--artefacts"
REBUILD = "--rebuild"
SOURCE = "--source"
BASE = "--base"


@dataclass(frozen=True)
class ReleaseArgs:
    """``release``: the tag, where the files go (None: dist/<tag>/ of the project), the targets (none: the
    configuration's one), the folders to join instead of building (``--gather``, None without), config options."""

    tag: str
    artefacts: Path | None
    targets: tuple[str, ...]
    gather: tuple[Path, ...] | None
    config: tuple[str, ...]


@dataclass(frozen=True)
class RebuildArgs:
    """``rebuild``: the tag, the release's folder (None: dist/<tag>/), the targets to rebuild (none: every target of
    the folder), config options."""

    tag: str
    artefacts: Path | None
    targets: tuple[str, ...]
    config: tuple[str, ...]
    base: Base | None = None


@dataclass(frozen=True)
class VerifyArgs:
    """``verify``: the tag, the release's folder (None: dist/<tag>/), whether to rebuild the PGO binary after the
    checks (``--rebuild``), the targets it rebuilds (only with ``--rebuild``), config options."""

    tag: str
    artefacts: Path | None
    rebuild: bool
    targets: tuple[str, ...]
    config: tuple[str, ...]
    base: Base | None = None


@dataclass(frozen=True)
class ImageArgs:
    """``image``: the tag, the release's folder (None: dist/<tag>/), the repository's URL for the image's source
    label (None: the crate's Cargo.toml ``repository``), config options."""

    tag: str
    artefacts: Path | None
    source: str | None
    config: tuple[str, ...]
    base: Base | None = None


@dataclass(frozen=True)
class DeterminismArgs:
    """``determinism``: config options only (no tag: it builds HEAD)."""

    config: tuple[str, ...]


def _tag_and_artefacts(posargs: Sequence[str], session: str) -> tuple[str, Path | None, list[str]]:
    """The positional tag, ``--artefacts DIR`` (absolute), and the rest."""
    tag, rest = split_tag(posargs, session)
    artefacts, rest = take_option(rest, ARTEFACTS)
    return tag, (Path(artefacts).absolute() if artefacts else None), rest


def take_base(rest: Sequence[str]) -> tuple[Base | None, list[str]]:
    """``--base DIR@sha256:<digest>``: an OCI image layout folder (absolute) and the digest of its image index or
    manifest; anything else refused in one line."""
    given, left = take_option(list(rest), BASE)
    if given is None:
        return None, left
    folder, _, digest = given.rpartition("@")
    if not folder or not is_digest(digest):
        raise ConfigError(
            f"{BASE} {given!r} is not DIR@sha256:<64 hex digits>",
            f"write {BASE} DIR@sha256:..., DIR an OCI image layout and the digest of its image index or manifest",
        )
    return Base(Path(folder).absolute(), digest), left


def parse_release(posargs: Sequence[str]) -> ReleaseArgs:
    """``release``'s posargs; ``--gather`` takes no ``--target`` nor config option."""
    tag, artefacts, rest = _tag_and_artefacts(posargs, "release")
    gathered, rest = take_gather(rest)
    targets, rest = take_all(rest, TARGET)
    if gathered is not None and (targets or rest):
        raise ConfigError(
            f"--gather joins folders: {(['--target'] if targets else rest)[0]} is not an option of it",
            "nox -s release -- vX.Y.Z --gather DIR [DIR ...] [--artefacts OUT]",
        )
    gather = None if gathered is None else tuple(Path(folder) for folder in gathered)
    return ReleaseArgs(tag, artefacts, tuple(targets), gather, tuple(rest))


def parse_rebuild(posargs: Sequence[str]) -> RebuildArgs:
    """``rebuild``'s posargs."""
    tag, artefacts, rest = _tag_and_artefacts(posargs, "rebuild")
    targets, rest = take_all(rest, TARGET)
    base, rest = take_base(rest)
    return RebuildArgs(tag, artefacts, tuple(targets), tuple(rest), base)


def parse_verify(posargs: Sequence[str]) -> VerifyArgs:
    """``verify``'s posargs; ``--target`` only with ``--rebuild`` (verify itself checks every target's files)."""
    tag, artefacts, rest = _tag_and_artefacts(posargs, "verify")
    targets, rest = take_all(rest, TARGET)
    base, rest = take_base(rest)
    rebuild = REBUILD in rest
    rest = [arg for arg in rest if arg != REBUILD]
    if targets and not rebuild:
        raise ConfigError(
            "verify checks every target's files: --target picks the targets verify --rebuild rebuilds",
            "add --rebuild, or leave --target out",
        )
    if base is not None and not rebuild:
        raise ConfigError(
            "verify reads the image's base from its layout: --base is the base verify --rebuild makes the image on",
            "add --rebuild, or leave --base out",
        )
    return VerifyArgs(tag, artefacts, rebuild, tuple(targets), tuple(rest), base)


def parse_determinism(posargs: Sequence[str]) -> DeterminismArgs:
    """``determinism``'s posargs: all of them the configuration's (``--target`` included)."""
    return DeterminismArgs(tuple(posargs))


def parse_image(posargs: Sequence[str]) -> ImageArgs:
    """``image``'s posargs; an empty ``--source`` is refused."""
    tag, artefacts, rest = _tag_and_artefacts(posargs, "image")
    source, rest = take_option(rest, SOURCE)
    if source is not None and not source.strip():
        raise ConfigError(f"{SOURCE} needs the repository's URL", f"write {SOURCE} https://github.com/OWNER/REPO")
    base, rest = take_base(rest)
    return ImageArgs(tag, artefacts, source, tuple(rest), base)
