"""``nox -s image -- vX.Y.Z [--artefacts DIR] [--source URL]``: an OCI image layout of a release's PGO binaries.

The release's folder (the one ``nox -s release`` wrote, as ``verify`` reads it) is verified first; then each Linux
target's PGO binary, read back from its tarball, becomes one image FROM scratch (the binary alone at ``/<bin>``, its
entrypoint), all of them in one image index by platform. The layout goes into the release's folder as
``<bin>-<tag>-image/``, written in a temp folder and renamed, or not at all. Its bytes come from the release's files
and SOURCE_DATE_EPOCH only (recipes/reproducible/oci.py): the same release gives the same index digest anywhere.

A binary linked against glibc is not put in a scratch image (it would not start: there is no C library in it);
a release of glibc targets only is refused, one with a static target too leaves the glibc ones out, saying so.
"""

from __future__ import annotations

import os
import shutil
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from recipes import manifest as release_manifest
from recipes.config import Config
from recipes.errors import CheckFailed, ConfigError, EnvironmentRefused, MissingInput
from recipes.files import write_atomically
from recipes.manifest import Manifest
from recipes.provenance import image_folder, read_manifest, read_sums, release_location, verify
from recipes.reproducible import (
    Image,
    Layout,
    Platform,
    image_layout,
    platform_of,
    release_binary,
    rfc3339,
    sha256_bytes,
)
from recipes.runner import say

#: what the manifest's ``libc`` says of a static binary (recipes/elf.py)
STATIC = "static, needs no glibc"
#: the labels of the profile a binary was built with and of its target (the project's name as their namespace)
PROFILE_LABEL = "pgo-recipes.profile.sha256"
TARGET_LABEL = "pgo-recipes.target"


@dataclass(frozen=True)
class Chosen:
    """The targets of a release that go into its image, and the notes on those that do not."""

    images: tuple[tuple[Manifest, Platform], ...]
    notes: tuple[str, ...]


def choose_targets(manifests: Mapping[str, Manifest], tag: str, directory: Path) -> Chosen:
    """The release's Linux targets with a static binary, each with its platform; no Linux target, only glibc ones,
    or two of one platform refused in one line."""
    chosen: list[tuple[Manifest, Platform]] = []
    notes: list[str] = []
    glibc: list[Manifest] = []
    triples = ", ".join(m.triple for m in manifests.values())
    for manifest in manifests.values():
        platform = platform_of(manifest.triple)
        if platform is None:
            notes.append(f"note: {manifest.triple} is not in the image: an OCI image of this kind runs Linux binaries")
        elif manifest.libc != STATIC:
            glibc.append(manifest)
        else:
            chosen.append((manifest, platform))
    if not chosen and not glibc:
        raise MissingInput(
            f"the release {tag} in {directory} has no Linux target (it holds {triples})",
            "an image runs a Linux binary: release a Linux target, e.g. --target x86_64-unknown-linux-musl",
        )
    if not chosen:
        first = glibc[0]
        raise EnvironmentRefused(
            f"{first.triple}'s binary is linked against {first.libc}: the image is FROM scratch, which has no C "
            "library, so it would not start",
            "release a static target for the image (--target x86_64-unknown-linux-musl, aarch64-unknown-linux-musl)",
        )
    notes += [
        f"note: {m.triple} is not in the image: its binary needs {m.libc}, which a scratch image has not" for m in glibc
    ]
    seen: dict[str, str] = {}
    for manifest, platform in chosen:
        if str(platform) in seen:
            raise ConfigError(
                f"{seen[str(platform)]} and {manifest.triple} are both {platform}: an image index holds one image "
                "per platform",
                "release one static target per architecture",
            )
        seen[str(platform)] = manifest.triple
    return Chosen(tuple(chosen), tuple(notes))


def repository_url(config: Config, package: str) -> str | None:
    """The ``repository`` of ``package``'s Cargo.toml (the configuration's manifest), when it is written there."""
    try:
        data = tomllib.loads(config.manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    fields = data.get("package")
    if not isinstance(fields, dict) or fields.get("name") != package:
        return None
    url = fields.get("repository")
    return url if isinstance(url, str) and url.strip() else None


def labels_of(manifest: Manifest, source: str) -> dict[str, str]:
    """The labels of one target's image: the OCI's (source, revision, version, created, title) and its profile's."""
    return {
        **annotations_of(manifest, source),
        PROFILE_LABEL: manifest.profile_sha256,
        TARGET_LABEL: manifest.triple,
    }


def annotations_of(manifest: Manifest, source: str) -> dict[str, str]:
    """The OCI's annotations of a release: the image index's, and every image's labels."""
    return {
        "org.opencontainers.image.source": source,
        "org.opencontainers.image.revision": manifest.commit,
        "org.opencontainers.image.version": manifest.tag.removeprefix("v"),
        "org.opencontainers.image.created": rfc3339(manifest.source_date_epoch),
        "org.opencontainers.image.title": manifest.bin,
    }


def read_manifests(tag: str, directory: Path) -> dict[str, Manifest]:
    """The manifests of ``tag`` that the release's SHA256SUMS lists (verify has checked them)."""
    return {
        name: release_manifest.parse(read_manifest(directory / name), name)
        for name in sorted(read_sums(directory))
        if name.endswith("-manifest.json") and f"-{tag}-" in name
    }


def pgo_binary(directory: Path, manifest: Manifest) -> bytes:
    """The PGO binary of a target, read from its tarball with every member checked, its sha256 the manifest's."""
    pgo = manifest.artefacts.pgo
    if pgo.binary is None:  # not reached: the manifest's parser requires it
        raise CheckFailed(f"{manifest.names.manifest} names no binary in {pgo.file}", "download the release again")
    data = release_binary(directory / pgo.file, pgo.binary, manifest.source_date_epoch)
    if sha256_bytes(data) != pgo.binary_sha256:
        raise CheckFailed(
            f"{pgo.binary} in {pgo.file} has sha256 {sha256_bytes(data)}, the manifest records {pgo.binary_sha256}",
            "download it again",
        )
    return data


def build_layout(tag: str, directory: Path, manifests: Mapping[str, Manifest], source: str) -> tuple[Layout, Chosen]:
    """The layout of a verified release's static Linux PGO binaries."""
    chosen = choose_targets(manifests, tag, directory)
    first = chosen.images[0][0]
    images = [
        Image(
            platform,
            manifest.bin,
            pgo_binary(directory, manifest),
            labels_of(manifest, source),
            manifest.source_date_epoch,
        )
        for manifest, platform in chosen.images
    ]
    return image_layout(images, tag, annotations_of(first, source)), chosen


def write_layout(out: Path, files: Mapping[str, bytes]) -> None:
    """The layout's files in a new folder at once: written in a temp folder beside it, then renamed."""
    staging = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        for name, data in sorted(files.items()):
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, data)
        os.replace(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def make_image(
    tag: str, config: Config, environ: Mapping[str, str], artefacts: Path | None, source: str | None
) -> list[str]:
    """``nox -s image``: the release verified, its image layout written into its folder; the summary's lines."""
    _, repo, directory = release_location(tag, config, environ, artefacts)
    verified = verify(tag, directory, repo, environ)
    say(f"image: {verified[-1]}")
    manifests = read_manifests(tag, directory)
    first = next(iter(manifests.values()))
    out = directory / image_folder(first.bin, tag)
    if out.exists() or out.is_symlink():
        raise EnvironmentRefused(f"{out} already exists", "an image is written once: remove it to build it again")
    url = source or repository_url(config, first.package)
    if url is None:
        raise ConfigError(
            f"the image's org.opencontainers.image.source label needs the repository's URL: {config.manifest} has "
            f"no repository for {first.package}",
            'add repository = "https://..." to its [package], or give --source URL',
        )
    layout, chosen = build_layout(tag, directory, manifests, url)
    write_layout(out, layout.files)
    lines = [f"image {tag} in {out}: index {layout.index_digest} ({len(layout.images)} platforms)"]
    by_platform = {str(platform): manifest for manifest, platform in chosen.images}
    for platform, blobs in layout.images:
        manifest = by_platform[str(platform)]
        lines.append(
            f"  {platform}  {manifest.triple}  manifest {blobs.manifest.digest}  binary sha256 "
            f"{manifest.artefacts.pgo.binary_sha256}"
        )
    lines += list(chosen.notes)
    lines.append(f"  inspect: skopeo inspect oci:{out}:{tag}")
    return lines
