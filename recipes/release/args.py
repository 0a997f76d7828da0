"""The posargs of each release session, parsed once into a typed record: what each session accepts is here.

``nox -s release -- vX.Y.Z [--artefacts DIR] [--target T ...] [config options]``,
``nox -s release -- vX.Y.Z --gather DIR [DIR ...] [--artefacts OUT]``,
``nox -s rebuild -- vX.Y.Z [--artefacts DIR] [--target T ...] [--base DIR@sha256:D] [config options]``,
``nox -s verify -- vX.Y.Z [--artefacts DIR] [--rebuild [--target T ...] [--base DIR@sha256:D]] [config options]``,
``nox -s determinism -- [config options]``,
``nox -s image -- vX.Y.Z [--artefacts DIR] [--source URL] [--base DIR@sha256:D] [config options]``.

The tag comes first; then each session's options, declared once below as :class:`Option` records, are taken out by
one argparse parser (:func:`~recipes.release.reproducible.tags.take_options`, as ``train --shard`` and ``merge
--gather`` are); what is left is the configuration's (:func:`recipes.config.load_config` refuses what it does not know,
as ``session arguments: unknown argument ...``). A misplaced option is one :class:`ConfigError` line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from recipes.errors import ConfigError
from recipes.inputs import user_path
from recipes.release.matrix import TARGET
from recipes.release.reproducible import split_tag
from recipes.release.reproducible.oci import Base, is_digest
from recipes.release.reproducible.tags import GATHER, Option, Taken, take_options

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


#: each option once, as every session that takes it declares it
ARTEFACTS_OPTION = Option(ARTEFACTS, hint=f"write {ARTEFACTS} DIR")
TARGETS_OPTION = Option(TARGET, "all", "a target triple", f"write {TARGET} TRIPLE, one of `rustup target list`")
GATHER_OPTION = Option(GATHER, "folders")
REBUILD_OPTION = Option(REBUILD, "flag")
SOURCE_OPTION = Option(SOURCE, value="the repository's URL", hint=f"write {SOURCE} https://github.com/OWNER/REPO")
#: how --base is written, in every refusal of it
BASE_HINT = f"write {BASE} DIR@sha256:..., DIR an OCI image layout and the digest of its image index or manifest"
BASE_OPTION = Option(BASE, value="DIR@sha256:<digest>", hint=BASE_HINT)


@dataclass(frozen=True)
class _Parsed:
    """A release session's posargs: the tag, its options' values by flag (:func:`take_options`), the rest (the
    configuration's)."""

    tag: str
    taken: Taken
    rest: list[str]

    @property
    def artefacts(self) -> Path | None:
        given = self.taken.one(ARTEFACTS)
        return user_path(given, Path.cwd(), ARTEFACTS).absolute() if given else None

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(self.taken.all(TARGET)) if TARGET in self.taken.values else ()

    @property
    def base(self) -> Base | None:
        given = self.taken.one(BASE) if BASE in self.taken.values else None
        return None if given is None else parse_base(given)


def _parse(posargs: Sequence[str], session: str, *options: Option) -> _Parsed:
    """The positional tag first, then the session's ``options`` by one parser; the rest is the configuration's."""
    tag, rest = split_tag(posargs, session)
    taken, rest = take_options(rest, *options)
    return _Parsed(tag, taken, rest)


def parse_base(given: str) -> Base:
    """``--base DIR@sha256:<digest>``: an OCI image layout folder (absolute) and the digest of its image index or
    manifest; anything else refused in one line."""
    folder, _, digest = given.rpartition("@")
    if not folder or not is_digest(digest):
        raise ConfigError(f"{BASE} {given!r} is not DIR@sha256:<64 hex digits>", BASE_HINT)
    return Base(user_path(folder, Path.cwd(), BASE).absolute(), digest)


def parse_release(posargs: Sequence[str]) -> ReleaseArgs:
    """``release``'s posargs; ``--gather`` takes no ``--target`` nor config option."""
    args = _parse(posargs, "release", ARTEFACTS_OPTION, GATHER_OPTION, TARGETS_OPTION)
    gathered = args.taken.folders(GATHER)
    if gathered is not None and (args.targets or args.rest):
        raise ConfigError(
            f"--gather joins folders: {(['--target'] if args.targets else args.rest)[0]} is not an option of it",
            "nox -s release -- vX.Y.Z --gather DIR [DIR ...] [--artefacts OUT]",
        )
    # relative ones stay relative: the session joins them to the project (recipes/sessions.py)
    gather = None if gathered is None else tuple(user_path(folder, Path(), GATHER) for folder in gathered)
    return ReleaseArgs(args.tag, args.artefacts, args.targets, gather, tuple(args.rest))


def parse_rebuild(posargs: Sequence[str]) -> RebuildArgs:
    """``rebuild``'s posargs."""
    args = _parse(posargs, "rebuild", ARTEFACTS_OPTION, TARGETS_OPTION, BASE_OPTION)
    return RebuildArgs(args.tag, args.artefacts, args.targets, tuple(args.rest), args.base)


def parse_verify(posargs: Sequence[str]) -> VerifyArgs:
    """``verify``'s posargs; ``--target`` only with ``--rebuild`` (verify itself checks every target's files)."""
    args = _parse(posargs, "verify", ARTEFACTS_OPTION, TARGETS_OPTION, BASE_OPTION, REBUILD_OPTION)
    base = args.base  # a malformed --base is refused first, as itself
    rebuild = args.taken.flag(REBUILD)
    if args.targets and not rebuild:
        raise ConfigError(
            "verify checks every target's files: --target picks the targets verify --rebuild rebuilds",
            "add --rebuild, or leave --target out",
        )
    if base is not None and not rebuild:
        raise ConfigError(
            "verify reads the image's base from its layout: --base is the base verify --rebuild makes the image on",
            "add --rebuild, or leave --base out",
        )
    return VerifyArgs(args.tag, args.artefacts, rebuild, args.targets, tuple(args.rest), base)


def parse_determinism(posargs: Sequence[str]) -> DeterminismArgs:
    """``determinism``'s posargs: all of them the configuration's (``--target`` included)."""
    return DeterminismArgs(tuple(posargs))


def url_problem(url: str) -> str | None:
    """Why ``url`` is not an http(s) URL of a host without white space or a control character, or None."""
    if any(c.isspace() or not c.isprintable() for c in url):
        return "it holds white space or a control character"
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError as exc:
        return f"it is not a URL ({exc})"
    if parts.scheme.lower() not in ("http", "https"):
        return f"its scheme is {parts.scheme or 'missing'}, not http or https"
    return None if host else "it names no host"


def check_source(url: str, given: str) -> str:
    """``url``, the image's ``org.opencontainers.image.source``, when it is an http(s) URL (:func:`url_problem`);
    else one line naming where it was ``given``."""
    problem = url_problem(url)
    if problem is not None:
        raise ConfigError(
            f"{given} {url[:200]!r} is not an http(s) URL for the image's source label: {problem}",
            SOURCE_OPTION.hint or "",
        )
    return url


def parse_image(posargs: Sequence[str]) -> ImageArgs:
    """``image``'s posargs; an empty ``--source``, or one that is not an http(s) URL, is refused."""
    args = _parse(posargs, "image", ARTEFACTS_OPTION, SOURCE_OPTION, BASE_OPTION)
    source = args.taken.one(SOURCE)
    if source is not None and not source.strip():
        raise SOURCE_OPTION.missing()
    if source is not None:
        check_source(source, SOURCE)
    return ImageArgs(args.tag, args.artefacts, source, tuple(args.rest), args.base)
