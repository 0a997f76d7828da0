"""``nox -s image -- vX.Y.Z [--artefacts DIR] [--source URL]``: an OCI image layout of a release's PGO binaries.

The release's folder (the one ``nox -s release`` wrote, as ``verify`` reads it) is verified first; then each Linux
target's PGO binary, read back from its tarball, becomes one image FROM scratch (the binary alone at ``/<bin>``, its
entrypoint), all of them in one image index by platform. The layout goes into the release's folder as
``<bin>-<tag>-image/``, written in a temp folder and renamed, or not at all. Its bytes come from the release's files
and SOURCE_DATE_EPOCH only (recipes/release/reproducible/oci.py): the same release gives the same index digest anywhere.

A binary linked against glibc is not put in a scratch image (it would not start: there is no C library in it);
a release of glibc targets only is refused, one with a static target too leaves the glibc ones out, saying so. With
``--base DIR@sha256:<digest>`` (an OCI layout the user supplies; nothing is fetched) the glibc targets go in, each on
the base's image of its platform; static targets stay FROM scratch. The base's digest is recorded (a label of those
images and an annotation of the index, the statement's parameters) for verify and rebuild.
"""

from __future__ import annotations

import io
import json
import tarfile
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recipes.config import Config
from recipes.errors import CheckFailed, ConfigError, EnvironmentRefused, MissingInput
from recipes.files import write_atomically
from recipes.inputs import NotRegularFile, read_json, read_regular, regular_size
from recipes.release import diff as diffoscope
from recipes.release import manifest as release_manifest
from recipes.release.args import check_source, url_problem
from recipes.release.make import write_dir
from recipes.release.manifest import Manifest
from recipes.release.provenance import (
    encode,
    image_folder,
    image_index_name,
    is_image_layout,
    read_manifest,
    read_statement,
    read_sums,
    release_location,
    statement,
    statement_name,
    tarball_binary,
    verify,
)
from recipes.release.reproducible import (
    REF_NAME,
    SUMS,
    Image,
    Layout,
    Platform,
    image_layout,
    platform_of,
    rfc3339,
    sha256_bytes,
    sha256sums_text,
)
from recipes.release.reproducible.oci import Base, BaseImage, is_digest, platform_text
from recipes.runner import say
from recipes.workdir import WorkDir

#: what the manifest's ``libc`` says of a static binary (recipes/llvm/elf.py)
STATIC = "static, needs no glibc"
#: the labels of the profile a binary was built with and of its target (the project's name as their namespace)
PROFILE_LABEL = "pgo-recipes.profile.sha256"
TARGET_LABEL = "pgo-recipes.target"
#: the label of an image made on a base (and the image index's annotation): the digest ``--base`` named
BASE_LABEL = "pgo-recipes.base"
#: the build type and builder of the image's provenance statement (``nox -s image``, version 1 of its parameters)
IMAGE_BUILD_TYPE = "urn:pgo-recipes:buildtype:image:v1"
IMAGE_BUILDER_ID = "urn:pgo-recipes:builder:nox-image"


@dataclass(frozen=True)
class Chosen:
    """The targets of a release that go into its image, and the notes on those that do not."""

    images: tuple[tuple[Manifest, Platform], ...]
    notes: tuple[str, ...]


def choose_targets(manifests: Mapping[str, Manifest], tag: str, directory: Path, base: str | None = None) -> Chosen:
    """The release's Linux targets with a static binary, each with its platform, and with a ``base`` (its digest)
    the glibc ones too, but for a platform a static target has (that one stays FROM scratch); no Linux target, only
    glibc ones without a base, a base no target goes on, or two of one platform refused in one line."""
    chosen: list[tuple[Manifest, Platform]] = []
    notes: list[str] = []
    glibc: list[Manifest] = []
    triples = ", ".join(m.triple for m in manifests.values())
    static = {str(platform_of(m.triple)): m.triple for m in manifests.values() if m.libc == STATIC}
    for manifest in manifests.values():
        platform = platform_of(manifest.triple)
        if platform is None:
            notes.append(f"note: {manifest.triple} is not in the image: an OCI image of this kind runs Linux binaries")
        elif manifest.libc != STATIC and base is not None and str(platform) in static:
            notes.append(
                f"note: {manifest.triple} is not in the image: its {platform} image is {static[str(platform)]}'s, "
                "static, FROM scratch"
            )
        elif manifest.libc != STATIC and base is None:
            glibc.append(manifest)
        else:
            chosen.append((manifest, platform))
    if base is not None and all(m.libc == STATIC for m, _ in chosen):
        raise ConfigError(
            f"--base is for glibc targets: the release {tag} has none that goes in the image (it holds {triples})",
            "leave --base out: static targets are FROM scratch",
        )
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


def labels_of(manifest: Manifest, source: str, base: str | None = None) -> dict[str, str]:
    """The labels of one target's image: the OCI's (source, revision, version, created, title), its profile's, and
    the base's digest for a glibc target on a ``base``."""
    return {
        **annotations_of(manifest, source),
        PROFILE_LABEL: manifest.profile_sha256,
        TARGET_LABEL: manifest.triple,
        **({BASE_LABEL: base} if base is not None and manifest.libc != STATIC else {}),
    }


def index_annotations(manifest: Manifest, source: str, base: str | None) -> dict[str, str]:
    """The image index's annotations: the OCI's, and the base's digest when the image has one."""
    return {**annotations_of(manifest, source), **({BASE_LABEL: base} if base is not None else {})}


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
    return tarball_binary(directory, manifest, pgo)


def base_images(chosen: Chosen, base: Base | None) -> dict[str, BaseImage]:
    """The base's image of each glibc target's platform (read and checked; a platform the base lacks refused)."""
    if base is None:
        return {}
    return {str(p): base.image(p) for m, p in chosen.images if m.libc != STATIC}


def build_layout(
    tag: str, directory: Path, manifests: Mapping[str, Manifest], source: str, base: Base | None = None
) -> tuple[Layout, Chosen]:
    """The layout of a verified release's static Linux PGO binaries, and its glibc ones on ``base``."""
    digest = base.digest if base else None
    chosen = choose_targets(manifests, tag, directory, digest)
    bases = base_images(chosen, base)
    return _layout(tag, chosen, bases, source, digest, lambda manifest: pgo_binary(directory, manifest)), chosen


def _layout(
    tag: str,
    chosen: Chosen,
    bases: Mapping[str, BaseImage],
    source: str,
    digest: str | None,
    binary: Callable[[Manifest], bytes],
) -> Layout:
    """The layout of the chosen targets' ``binary`` (the published PGO one, or the rebuilt one), each on its
    platform's image of the base (``bases``, of ``digest``) or FROM scratch, labelled with ``source``."""
    images = [
        Image(platform, m.bin, binary(m), labels_of(m, source, digest), m.source_date_epoch, bases.get(str(platform)))
        for m, platform in chosen.images
    ]
    return image_layout(images, tag, index_annotations(chosen.images[0][0], source, digest))


def image_predicate(tag: str, chosen: Chosen, source: str, base: str | None = None) -> dict[str, Any]:
    """The SLSA v1 provenance predicate of a release's image: made by ``nox -s image`` from the release's PGO
    tarballs (by sha256), the tag, the source URL of its labels, the base's digest (with a base) and
    SOURCE_DATE_EPOCH; no time, no path."""
    first = chosen.images[0][0]
    ordered = sorted(chosen.images, key=lambda one: (one[1].architecture, one[1].variant or ""))  # as the index
    based = [str(p) for m, p in ordered if m.libc != STATIC]
    on_base = (
        [{"name": "base", "digest": {"sha256": base.removeprefix("sha256:")}, "annotations": {"platforms": based}}]
        if base is not None
        else []
    )
    return {
        "buildDefinition": {
            "buildType": IMAGE_BUILD_TYPE,
            "externalParameters": {
                "tag": tag,
                "source": source,
                "platforms": [str(p) for _, p in ordered],
                **({"base": base} if base is not None else {}),
            },
            "internalParameters": {"source_date_epoch": first.source_date_epoch},
            "resolvedDependencies": [
                {
                    "name": m.artefacts.pgo.file,
                    "digest": {"sha256": m.artefacts.pgo.sha256},
                    "annotations": {
                        "target": m.triple,
                        "binary": m.bin,
                        "binary_sha256": m.artefacts.pgo.binary_sha256,
                    },
                }
                for m, _ in ordered
            ]
            + on_base,
        },
        "runDetails": {"builder": {"id": IMAGE_BUILDER_ID}},
    }


def record_image(
    directory: Path,
    tag: str,
    bin_name: str,
    files: Mapping[str, bytes],
    chosen: Chosen,
    source: str,
    base: str | None = None,
) -> list[str]:
    """The image index (a copy of its blob) and its statement beside the release's files, and both in SHA256SUMS
    (rewritten at once, last): the index digest checkable from the release's own files. Returns their names."""
    index_name = image_index_name(bin_name, tag)
    top = json.loads(files["index.json"])
    index_digest = str(top["manifests"][0]["digest"])
    index = files[f"blobs/sha256/{index_digest.removeprefix('sha256:')}"]
    # the statement's subject: the image index by digest (what a registry pulls by)
    subject = {"name": image_folder(bin_name, tag), "digest": {"sha256": index_digest.removeprefix("sha256:")}}
    stated = encode(statement([subject], image_predicate(tag, chosen, source, base)))
    sums = read_sums(directory)
    for name, data in ((index_name, index), (statement_name(index_name), stated)):
        write_atomically(directory / name, data)
        sums[name] = sha256_bytes(data)
    write_atomically(directory / SUMS, sha256sums_text(sums).encode())
    return [index_name, statement_name(index_name)]


def make_image(
    tag: str,
    config: Config,
    environ: Mapping[str, str],
    artefacts: Path | None,
    source: str | None,
    base: Base | None = None,
) -> list[str]:
    """``nox -s image``: the release verified, its image layout written into its folder (its glibc targets on
    ``base``, checked first); the summary's lines."""
    if base is not None:
        base.check()
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
    if source is None:
        check_source(url, f"the repository of {first.package} in {config.manifest},")
    layout, chosen = build_layout(tag, directory, manifests, url, base)
    digest = base.digest if base else None
    write_dir(out, layout.files)
    recorded = record_image(directory, tag, first.bin, layout.files, chosen, url, digest)
    lines = [f"image {tag} in {out}: index {layout.index_digest} ({len(layout.images)} platforms)"]
    lines.append(f"  recorded: {' and '.join(recorded)}, both in SHA256SUMS")
    by_platform = {str(platform): manifest for manifest, platform in chosen.images}
    for platform, blobs in layout.images:
        manifest = by_platform[str(platform)]
        on = f"  on the base {digest}" if digest and manifest.libc != STATIC else ""
        lines.append(
            f"  {platform}  {manifest.triple}  manifest {blobs.manifest.digest}  binary sha256 "
            f"{manifest.artefacts.pgo.binary_sha256}{on}"
        )
    lines += list(chosen.notes)
    lines.append(f"  inspect: skopeo inspect oci:{out}:{tag}")
    return lines


# --- nox -s verify: the image layout in a release's folder --------------------------------------------------------

_LAYOUT_HINT = "remove the layout and make it again: nox -s image"


class _Blobs(Mapping[str, bytes]):
    """The layout's blobs by digest: listed at once, by lstat (a link, fifo or device refused, nothing opened), each
    read (never through a link, never waiting on a fifo) and checked against its name (its sha256) only when asked
    for: a stray blob is named by :func:`_check_made`, never hashed."""

    def __init__(self, layout: Path) -> None:
        self.folder = layout / "blobs" / "sha256"
        self.sizes: dict[str, int] = {}
        self._read: dict[str, bytes] = {}
        for path in sorted(self.folder.iterdir()) if self.folder.is_dir() else []:
            try:
                self.sizes[f"sha256:{path.name}"] = regular_size(path)
            except (NotRegularFile, OSError) as exc:
                raise CheckFailed(
                    f"blobs/sha256/{path.name} of the image layout is not a regular file", _LAYOUT_HINT
                ) from exc

    def __getitem__(self, digest: str) -> bytes:
        if digest not in self._read:
            name = digest.removeprefix("sha256:") if digest in self.sizes else ""
            if not name:
                raise KeyError(digest)
            try:
                data = read_regular(self.folder / name)
            except (NotRegularFile, OSError) as exc:
                raise CheckFailed(
                    f"blobs/sha256/{name} of the image layout is not a regular file", _LAYOUT_HINT
                ) from exc
            if sha256_bytes(data) != name:
                raise CheckFailed(
                    f"the image layout's blob {name[:12]} has sha256 {sha256_bytes(data)[:12]}: it is not the blob "
                    "its name says",
                    _LAYOUT_HINT,
                )
            self._read[digest] = data
        return self._read[digest]

    def __contains__(self, digest: object) -> bool:  # Mapping's would read the blob
        return digest in self.sizes

    def __iter__(self) -> Iterator[str]:
        return iter(self.sizes)

    def __len__(self) -> int:
        return len(self.sizes)

    def described(self, descriptor: Any, what: str) -> bytes | None:
        """The blob ``descriptor`` names (None: not in the layout), its size the descriptor's before it is read."""
        digest = descriptor.get("digest") if isinstance(descriptor, dict) else None
        if not isinstance(digest, str) or digest not in self.sizes:
            return None
        size = descriptor.get("size")
        if isinstance(size, int) and size != self.sizes[digest]:
            raise CheckFailed(
                f"the image layout's blob {digest.removeprefix('sha256:')[:12]} ({what}) is {self.sizes[digest]} "
                f"bytes, its descriptor says {size}",
                _LAYOUT_HINT,
            )
        return self[digest]


def _blobs(layout: Path) -> _Blobs:
    """The layout's blobs by digest, each one's sha256 checked against its name when it is read (:class:`_Blobs`)."""
    return _Blobs(layout)


def _blob_json(blobs: Mapping[str, bytes], descriptor: Any, what: str) -> dict[str, Any]:
    digest = descriptor.get("digest") if isinstance(descriptor, dict) else None
    if not isinstance(digest, str) or digest not in blobs:
        raise CheckFailed(f"the image layout has no blob of {what} ({digest})", _LAYOUT_HINT)
    found = blobs.described(descriptor, what) if isinstance(blobs, _Blobs) else blobs[digest]
    try:
        data = json.loads(found or b"")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckFailed(f"the blob of {what} in the image layout is not JSON", _LAYOUT_HINT) from exc
    if not isinstance(data, dict):
        raise CheckFailed(f"the blob of {what} in the image layout is not a JSON object", _LAYOUT_HINT)
    return data


def _annotations(data: Mapping[str, Any]) -> Mapping[str, Any]:
    found = data.get("annotations")
    return found if isinstance(found, dict) else {}


def _layer_problem(layer: bytes, name: str, binary_sha256: str) -> str | None:
    """What makes an image's layer other than the one file ``name`` of sha256 ``binary_sha256``, or None."""
    try:
        with tarfile.open(fileobj=io.BytesIO(layer), mode="r:") as tar:
            members = tar.getmembers()
            others = [m.name for m in members if m.name != name]
            if others:
                return f"holds {others[0]!r}, not only /{name}"
            if len(members) != 1 or not members[0].isreg():
                return f"holds no regular file /{name}"
            stream = tar.extractfile(members[0])
            found = sha256_bytes(stream.read()) if stream is not None else ""
    except tarfile.TarError as exc:
        return f"is not a whole tar ({exc})"
    if found != binary_sha256:
        return f"holds a /{name} of sha256 {found}, not the release's PGO binary ({binary_sha256})"
    return None


def check_layout(tag: str, directory: Path, manifests: Mapping[str, Manifest]) -> list[str]:
    """The image layout ``nox -s image`` wrote into a verified release's folder, if there is one: every blob is the
    blob its name says, the index lists exactly the release's static Linux targets, each image's layer holds exactly
    that target's PGO binary, and the whole layout is the one ``image`` writes from this release (its source label
    read from the layout). Every difference is one line; the result is one line per check (none without a layout)."""
    first = next(iter(manifests.values()))
    layout = directory / image_folder(first.bin, tag)
    recorded = check_recorded(tag, directory, manifests)
    lines = [recorded.line] if recorded else []
    if not is_image_layout(layout):
        if recorded:
            lines.append(f"note: the layout {layout.name} is not here: pull the image by {recorded.digest} to check it")
        return lines
    name = layout.name
    blobs = _blobs(layout)
    top = read_json(layout / "index.json", "the image layout's index.json", CheckFailed, _LAYOUT_HINT)
    if not isinstance(top, dict):
        raise CheckFailed("index.json of the image layout is not a JSON object", _LAYOUT_HINT)
    listing = top.get("manifests")
    refs = [m for m in listing if isinstance(m, dict)] if isinstance(listing, list) else []
    named = [m for m in refs if _annotations(m).get(REF_NAME) == tag]
    if len(named) != 1:
        raise CheckFailed(f"{name}/index.json names {len(named)} images {tag}, not one", _LAYOUT_HINT)
    index = _blob_json(blobs, named[0], "the image index")
    if recorded is None:
        lines.append(f"note: {name} is not recorded in SHA256SUMS (no {image_index_name(first.bin, tag)})")
    elif named[0].get("digest") != recorded.digest:
        raise CheckFailed(
            f"{name}/index.json names the image index {named[0].get('digest')}, SHA256SUMS records {recorded.digest}",
            _LAYOUT_HINT,
        )
    base_digest = _annotations(index).get(BASE_LABEL)
    if base_digest is not None and (not isinstance(base_digest, str) or not is_digest(base_digest)):
        raise CheckFailed(f"{name}'s image index names the base {str(base_digest)[:80]!r}, not a digest", _LAYOUT_HINT)
    stated = recorded.base if recorded is not None else base_digest
    if stated != base_digest:
        raise CheckFailed(f"{name}'s image index names the base {base_digest}, its statement {stated}", _LAYOUT_HINT)
    base = Base(layout, base_digest) if base_digest else None
    chosen = choose_targets(manifests, tag, directory, base_digest)
    try:  # the base's blobs that nox -s image copied into the layout
        bases = base_images(chosen, base)
    except MissingInput as exc:
        raise CheckFailed(f"{name}: {exc.line()}", _LAYOUT_HINT) from exc
    expected = {str(platform): manifest for manifest, platform in chosen.images}
    listed = _listed_images(name, tag, index, expected)
    for platform, manifest in expected.items():
        lines.append(_check_image(name, platform, manifest, blobs, listed[platform], bases.get(platform), base_digest))
    made = _check_made(name, tag, layout, directory, manifests, index, base, blobs)
    lines.append(f"ok  {name}: index {made.index_digest}, as nox -s image writes it from this release")
    return lines


def _listed_images(name: str, tag: str, index: dict[str, Any], expected: Mapping[str, Manifest]) -> dict[str, Any]:
    """The image index's descriptors by platform: exactly one of each platform ``expected``, no other."""
    listed: dict[str, Any] = {}
    descriptors = index.get("manifests")
    for descriptor in descriptors if isinstance(descriptors, list) else []:
        platform = platform_text(descriptor.get("platform") if isinstance(descriptor, dict) else None)
        if platform not in expected:
            raise CheckFailed(
                f"{name}'s image index lists an image of {platform}, which the release {tag} has no static Linux "
                f"target of (it has {', '.join(expected)})",
                _LAYOUT_HINT,
            )
        if platform in listed:
            raise CheckFailed(f"{name}'s image index lists {platform} twice", _LAYOUT_HINT)
        listed[platform] = descriptor
    missing = [p for p in expected if p not in listed]
    if missing:
        raise CheckFailed(
            f"{name}'s image index has no image of {missing[0]} ({expected[missing[0]].triple})", _LAYOUT_HINT
        )
    return listed


def _check_image(
    name: str,
    platform: str,
    manifest: Manifest,
    blobs: Mapping[str, bytes],
    descriptor: dict[str, Any],
    below: BaseImage | None,
    base_digest: str | None,
) -> str:
    """The ``platform`` image's manifest: the base's layers unchanged (``below``, when there is a base), then one
    layer holding exactly the target's PGO binary. Its ok line."""
    image = _blob_json(blobs, descriptor, f"the {platform} image's manifest")
    layers = image.get("layers")
    if below is not None:
        if not isinstance(layers, list) or layers[:-1] != list(below.layers) or not layers[-1:]:
            raise CheckFailed(
                f"the {platform} image of {name} has not the layers of its base {base_digest} "
                f"({len(below.layers)}) and the binary's",
                _LAYOUT_HINT,
            )
        layers = layers[-1:]
    if not isinstance(layers, list) or len(layers) != 1 or not isinstance(layers[0], dict):
        raise CheckFailed(f"the {platform} image of {name} has not one layer", _LAYOUT_HINT)
    layer = (
        blobs.described(layers[0], f"the {platform} image's layer")
        if isinstance(blobs, _Blobs)
        else blobs.get(str(layers[0].get("digest")))
    )
    if layer is None:
        raise CheckFailed(f"the image layout has no blob of the {platform} image's layer", _LAYOUT_HINT)
    problem = _layer_problem(layer, manifest.bin, manifest.artefacts.pgo.binary_sha256 or "")
    if problem:
        raise CheckFailed(f"the {platform} image's layer in {name} {problem}", _LAYOUT_HINT)
    on = f" on the base {base_digest}'s {len(below.layers)} layers" if below is not None else " alone"
    return f"ok  {name}: the {platform} image holds {manifest.triple}'s PGO binary{on}"


def _check_made(
    name: str,
    tag: str,
    layout: Path,
    directory: Path,
    manifests: Mapping[str, Manifest],
    index: dict[str, Any],
    base: Base | None,
    blobs: _Blobs,
) -> Layout:
    """The whole layout is the one ``nox -s image`` writes from this release (its source label read from the
    layout's index): every file, none missing, none more. What it writes."""
    source = _annotations(index).get("org.opencontainers.image.source")
    if not isinstance(source, str) or not source:
        raise CheckFailed(f"{name}'s image index has no org.opencontainers.image.source annotation", _LAYOUT_HINT)
    try:
        made, _ = build_layout(tag, directory, manifests, source, base)
    except MissingInput as exc:
        raise CheckFailed(f"{name}: {exc.line()}", _LAYOUT_HINT) from exc
    found = {str(p.relative_to(layout)) for p in layout.rglob("*") if not p.is_dir()}
    # the documents that name the rest first (oci-layout, index.json), so that one change is always named by the
    # same file whatever the digests' order: blob names are digests, and a release's digests sort as they come; then
    # a file more by its name (a stray blob is never read), then the blobs
    documents = sorted(p for p in made.files if not p.startswith("blobs/"))
    blob_files = sorted(p for p in made.files if p.startswith("blobs/"))
    for path in documents:
        _check_made_file(name, layout, path, found, made, blobs)
    extra = sorted(found - set(made.files))
    if extra:
        raise CheckFailed(f"{name}/{extra[0]} is not a file nox -s image writes for this release", _LAYOUT_HINT)
    for path in blob_files:
        _check_made_file(name, layout, path, found, made, blobs)
    return made


def _check_made_file(name: str, layout: Path, path: str, found: set[str], made: Layout, blobs: _Blobs) -> None:
    """The file ``path`` of the layout (``name``) is there and the one ``made`` holds."""
    if path not in found or _layout_file(layout, path, blobs) != made.files[path]:
        raise CheckFailed(
            f"{name}/{path} is not what nox -s image writes from this release (index {made.index_digest})",
            _LAYOUT_HINT,
        )


def _layout_file(layout: Path, path: str, blobs: _Blobs) -> bytes:
    """A file of the layout: a blob as :class:`_Blobs` reads it (checked by its sha256 once), another one read as a
    regular file (never through a link, never waiting on a fifo)."""
    if path.startswith("blobs/sha256/"):
        return blobs[f"sha256:{path.removeprefix('blobs/sha256/')}"]
    try:
        return read_regular(layout / path)
    except (NotRegularFile, OSError) as exc:
        raise CheckFailed(f"{layout.name}/{path} of the image layout is not a regular file", _LAYOUT_HINT) from exc


_RECORD_HINT = "download the release's SHA256SUMS and image files again"


@dataclass(frozen=True)
class Recorded:
    """The image a release records: its index digest, the line of its checks, and what its statement's parameters
    record: the source URL of its labels and the base's digest (None: no base)."""

    digest: str
    line: str
    source: str
    base: str | None


def check_recorded(tag: str, directory: Path, manifests: Mapping[str, Manifest]) -> Recorded | None:
    """The image index SHA256SUMS records (verify has checked every listed file's sha256) and its statement: the
    statement's subject is that index's digest and its predicate the one ``nox -s image`` writes from this release.
    None when the release has no image."""
    first = next(iter(manifests.values()))
    index_name = image_index_name(first.bin, tag)
    sums = read_sums(directory)
    if index_name not in sums:
        return None
    digest = f"sha256:{sums[index_name]}"
    stated_name = statement_name(index_name)
    data = read_statement(directory / stated_name, "the image's provenance statement", _RECORD_HINT)
    subject = data.get("subject")
    want_subject = [{"name": image_folder(first.bin, tag), "digest": {"sha256": sums[index_name]}}]
    if subject != want_subject:
        found = (
            subject[0].get("digest")
            if isinstance(subject, list) and subject and isinstance(subject[0], dict)
            else subject
        )
        raise CheckFailed(
            f"{stated_name}'s subject is {json.dumps(found)[:90]}, not the image index SHA256SUMS records ({digest})",
            _RECORD_HINT,
        )
    pred = data.get("predicate")
    # its parameters: ``source`` (the labels' org.opencontainers.image.source) and ``base``, strings not empty
    definition = pred.get("buildDefinition") if isinstance(pred, dict) else None
    params = definition.get("externalParameters") if isinstance(definition, dict) else None
    stated = {k: v for k, v in params.items() if isinstance(v, str) and v} if isinstance(params, dict) else {}
    source = stated.get("source")
    if source is None:
        raise CheckFailed(f"{stated_name} records no source URL of the image", _RECORD_HINT)
    if url_problem(source) is not None:
        raise CheckFailed(
            f"{stated_name} records the source {source[:200]!r}, not an http(s) URL: {url_problem(source)}",
            _RECORD_HINT,
        )
    base = stated.get("base")
    base = base if base is not None and is_digest(base) else None  # None: no base
    if pred != image_predicate(tag, choose_targets(manifests, tag, directory, base), source, base):
        raise CheckFailed(
            f"{stated_name}'s predicate is not the one nox -s image writes from this release", _RECORD_HINT
        )
    line = f"ok  {index_name}: the image index {digest}, SHA256SUMS and {stated_name} name it"
    return Recorded(digest, line, source, base)


# --- nox -s rebuild: the image made again from the rebuilt binaries ------------------------------------------------


def rebuild_base(tag: str, directory: Path, base: Base | None) -> None:
    """The base ``rebuild`` was given is the one the release's image records (none when it records none), checked
    before anything is built: a missing or other base refused in one line."""
    _check_base(tag, check_recorded(tag, directory, read_manifests(tag, directory)), base)


def _check_base(tag: str, recorded: Recorded | None, base: Base | None) -> None:
    """:func:`rebuild_base` of the image the release records (``recorded``)."""
    stated = recorded.base if recorded else None
    given = base.digest if base else None
    if stated == given:
        if base is not None:
            base.check()
        return
    if stated is None:
        where = "records no image" if recorded is None else "records an image with no base"
        raise ConfigError(f"--base is for the image: the release {tag} {where}", "leave --base out")
    if given is None:
        raise ConfigError(
            f"the image of {tag} was made on the base {stated}: rebuilding it needs that base",
            f"give it again: --base DIR@{stated}",
        )
    raise ConfigError(
        f"the image of {tag} was made on the base {stated}, --base names {given}", f"give --base DIR@{stated}"
    )


def rebuild_image(
    tag: str,
    directory: Path,
    rebuilt: Mapping[str, Path],
    work: WorkDir,
    environ: Mapping[str, str],
    base: Base | None = None,
) -> list[str]:
    """The image a release records (SHA256SUMS' image index and its statement, checked as verify checks them) made
    again from the rebuilt PGO binaries (``{triple: binary}``) with the same labels, and its index digest compared
    with the recorded one. A mismatch is refused in one line naming the first differing blob (index, manifest,
    config, layer), diffoscope's report of a layer (the published one from the layout in the folder, the rebuilt
    one written in ``work``, a rebuild's work dir). No image recorded: no lines."""
    manifests = read_manifests(tag, directory)
    recorded = check_recorded(tag, directory, manifests)
    if recorded is None:
        return []
    _check_base(tag, recorded, base)  # the base given is the one recorded
    chosen = choose_targets(manifests, tag, directory, recorded.base)
    bases = base_images(chosen, base)
    missing = [m.triple for m, _ in chosen.images if m.triple not in rebuilt]
    if missing:
        return [f"note: the image is not rebuilt: it holds {missing[0]}, which was not rebuilt (rebuild every target)"]
    first = chosen.images[0][0]
    made = _layout(tag, chosen, bases, recorded.source, recorded.base, lambda m: rebuilt[m.triple].read_bytes())
    if made.index_digest == recorded.digest:
        return [f"match     image index {made.index_digest}, made again from the rebuilt binaries"]
    published = (directory / image_index_name(first.bin, tag)).read_bytes()
    write_dir(work.image_rebuilt, made.files)
    where = _differing_blob(json.loads(published), made, directory / image_folder(first.bin, tag), work, environ)
    raise CheckFailed(
        f"the image of {tag} made again from the rebuilt binaries has index {made.index_digest}, the release "
        f"records {recorded.digest}: {where[0]}",
        f"{where[1]}the rebuilt layout is {work.image_rebuilt}",
    )


def _differing_blob(
    index: Any, made: Layout, layout: Path, work: WorkDir, environ: Mapping[str, str]
) -> tuple[str, str]:
    """Which blob of the rebuilt image differs first from the published one, and the hint's first words (diffoscope's
    report of a layer). Blobs below the index are read from the release's layout when it is in the folder. The
    layer is compared first: its digest is in the config (the diff id), which differs with it."""
    published_blobs = _blobs(layout) if is_image_layout(layout) else {}
    listed = {
        platform_text(d["platform"]): d
        for d in (index.get("manifests") or [] if isinstance(index, dict) else [])
        if isinstance(d, dict) and isinstance(d.get("platform"), dict)
    }
    for platform, blobs in made.images:
        theirs = listed.get(str(platform))
        if theirs is None:
            return f"the published image index has no {platform} image", ""
        if theirs.get("digest") == blobs.manifest.digest:
            continue
        if theirs.get("digest") not in published_blobs:
            return (
                f"the {platform} manifest differs ({theirs.get('digest')} published, {blobs.manifest.digest} rebuilt)",
                f"put the layout {layout.name} in the release's folder to see which of its blobs differs; ",
            )
        manifest = _blob_json(published_blobs, theirs, f"the {platform} image's manifest")
        layers = manifest.get("layers")  # the binary's is the last (a base's come first)
        last = layers[-1] if isinstance(layers, list) and layers else None
        digest = last.get("digest") if isinstance(last, dict) else ""
        if digest != blobs.layer.digest and digest not in published_blobs:
            return f"the {platform} layer differs ({digest} published, not in the layout; {blobs.layer.digest})", ""
        if digest != blobs.layer.digest:
            theirs_tar = work.image_layer(platform.architecture, "published")
            ours_tar = work.image_layer(platform.architecture, "rebuilt")
            write_atomically(theirs_tar, published_blobs[str(digest)])
            write_atomically(ours_tar, blobs.layer.data)
            explained = diffoscope.explain(theirs_tar, ours_tar, work.image, environ)
            for line in explained.lines:
                say(line)
            hint = diffoscope.hint_words(explained, environ)
            return f"the {platform} layer differs ({digest} published, {blobs.layer.digest} rebuilt)", hint
        config = manifest.get("config")
        if not isinstance(config, dict) or config.get("digest") != blobs.config.digest:
            digest = config.get("digest") if isinstance(config, dict) else None
            return f"the {platform} config differs ({digest} published, {blobs.config.digest} rebuilt)", ""
        return f"the {platform} manifest differs ({theirs.get('digest')} published, {blobs.manifest.digest})", ""
    return "the image index differs (its annotations)", ""


def verify_image(tag: str, config: Config, environ: Mapping[str, str], artefacts: Path | None) -> list[str]:
    """``nox -s verify``'s check of the release's image layout (after
    :func:`recipes.release.provenance.verify_release`)."""
    _, _, directory = release_location(tag, config, environ, artefacts)
    return check_layout(tag, directory, read_manifests(tag, directory))
