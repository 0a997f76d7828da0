"""OCI image layouts written byte for byte the same anywhere: one image per platform, FROM scratch, in an image index.

An image of a binary is three blobs: its layer (an uncompressed tar of the binary alone, :func:`tar_bytes`: sorted
entries, owner 0 without names, one mtime), its configuration (platform, entrypoint, labels, the layer's diff id,
``created``) and its manifest (the two descriptors). An image index lists the manifests with their platforms; the
layout is the ``oci-layout`` file, ``index.json`` naming the image index by a tag, and ``blobs/sha256/<hex>``.
Every JSON document is written with sorted keys and no white space, and nothing in it comes from the machine, so
the same binaries, labels and time give the same index digest on any machine and path.

Layers are not compressed: a gzip stream's bytes depend on the zlib that wrote it (zlib-ng and zlib differ), a
tar's only on its entries.

An image may instead be made on a base image (:class:`Base`, read from an OCI layout the user supplies, by the digest
of its image index or manifest, every blob's sha256 checked): its layers come first, copied unchanged by digest, then
the binary's; its configuration is the base's with the entrypoint set, the labels added and the base's ``Cmd``
dropped (as a Dockerfile's ENTRYPOINT does). The base's blobs that name those layers (its index, the platform's
manifest and configuration) are copied into the layout too, unreferenced, so that the layout alone shows which base
it was made on: :func:`recipes.release.image.check_layout` reads the base back from it.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from recipes.errors import MissingInput
from recipes.inputs import NotRegularFile, read_regular, regular_size
from recipes.release.reproducible.base_layers import layer_problem
from recipes.release.reproducible.tarballs import sha256_bytes, tar_bytes

MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"
LAYOUT_FILE = "oci-layout"
LAYOUT_VERSION = "1.0.0"
REF_NAME = "org.opencontainers.image.ref.name"
#: the OCI's annotation of an image manifest naming the manifest of its base image
BASE_DIGEST = "org.opencontainers.image.base.digest"
#: the mode of the binary in its layer
BINARY_MODE = 0o755


def canonical_json(data: Mapping[str, Any]) -> bytes:
    """``data`` as JSON with sorted keys and no white space: one document, one byte string."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def rfc3339(epoch: int) -> str:
    """``epoch`` (SOURCE_DATE_EPOCH) as the configuration's ``created``: UTC, seconds, ``Z``."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Blob:
    """A content-addressed blob of the layout: its media type and bytes."""

    media_type: str
    data: bytes

    @cached_property  # a layer is the binary: hashed once, though the config, descriptors and file names need it
    def digest(self) -> str:
        return f"sha256:{sha256_bytes(self.data)}"

    def descriptor(self, **extra: Any) -> dict[str, Any]:
        """The OCI descriptor of this blob (media type, digest, size), with ``extra`` fields (platform, ...)."""
        return {"mediaType": self.media_type, "digest": self.digest, "size": len(self.data), **extra}


@dataclass(frozen=True)
class Platform:
    """An image's platform as the image index and the configuration name it."""

    os: str
    architecture: str
    variant: str | None = None

    def fields(self) -> dict[str, str]:
        return {
            "os": self.os,
            "architecture": self.architecture,
            **({"variant": self.variant} if self.variant else {}),
        }

    def __str__(self) -> str:
        return "/".join(part for part in (self.os, self.architecture, self.variant) if part)


#: Rust's architecture (a triple's first part) as OCI's GOARCH-style architecture and variant
_ARCHITECTURES: dict[str, tuple[str, str | None]] = {
    "x86_64": ("amd64", None),
    "aarch64": ("arm64", "v8"),
    "i686": ("386", None),
    "armv7": ("arm", "v7"),
    "arm": ("arm", "v6"),
    "riscv64gc": ("riscv64", None),
    "powerpc64le": ("ppc64le", None),
    "s390x": ("s390x", None),
}


def platform_of(triple: str) -> Platform | None:
    """The OCI platform of a Rust target triple; None for a target that is not Linux or an architecture unknown
    here."""
    parts = triple.split("-")
    if "linux" not in parts[1:]:
        return None
    known = _ARCHITECTURES.get(parts[0])
    return Platform("linux", *known) if known else None


@dataclass(frozen=True)
class BaseImage:
    """One platform's image of a base: its manifest, configuration and layers (descriptors and blobs, as the base's
    layout holds them) and the blobs that name it (``digest``'s index, when the base was named by an index)."""

    digest: str
    manifest: Blob
    config: Blob
    layers: tuple[dict[str, Any], ...]
    blobs: tuple[Blob, ...]

    def config_json(self) -> dict[str, Any]:
        data = json.loads(self.config.data)
        return data if isinstance(data, dict) else {}


@dataclass(frozen=True)
class Image:
    """One platform's image: the binary (at ``/<name>``, the entrypoint), its configuration's labels and time, and
    the base it is made on (None: FROM scratch)."""

    platform: Platform
    name: str
    binary: bytes
    labels: Mapping[str, str]
    created: int
    base: BaseImage | None = None


DIGEST_HEX = 64


def is_digest(text: str) -> bool:
    """Whether ``text`` is ``sha256:`` and 64 lower-case hex digits."""
    hexes = text.removeprefix("sha256:")
    return text.startswith("sha256:") and len(hexes) == DIGEST_HEX and all(c in "0123456789abcdef" for c in hexes)


_BASE_HINT = "give --base DIR@sha256:<digest>, DIR an OCI image layout (skopeo copy docker-archive:FILE oci:DIR:TAG)"


@dataclass(frozen=True)
class Base:
    """A base image in an OCI layout folder, named by the digest of its image index or image manifest; the blobs
    read from it are checked by their sha256 as they are read. :meth:`image` finds one platform's image."""

    folder: Path
    digest: str

    def blob(self, digest: Any, what: str, size: Any = None) -> bytes:
        """The blob ``digest`` names, a regular file of the layout (never a link followed nor a fifo opened) of
        ``size`` bytes (when the descriptor says), checked by its sha256 last."""
        if not isinstance(digest, str) or not is_digest(digest):
            raise MissingInput(f"the base's {what} has no sha256 digest ({digest!r})", _BASE_HINT)
        path = self.folder / "blobs" / "sha256" / digest.removeprefix("sha256:")
        where = f"the blob {digest[:19]} of the base image layout {self.folder} ({what})"
        try:
            found = regular_size(path)
            if isinstance(size, int) and found != size:
                raise MissingInput(f"{where} is {found} bytes, its descriptor says {size}", _BASE_HINT)
            data = read_regular(path)
        except NotRegularFile as exc:
            raise MissingInput(f"{where} is {exc}, not a regular file", _BASE_HINT) from exc
        except OSError as exc:
            raise MissingInput(
                f"the base image layout {self.folder} has no blob {digest} ({what}: {exc.strerror or exc})", _BASE_HINT
            ) from exc
        if f"sha256:{sha256_bytes(data)}" != digest:
            raise MissingInput(
                f"the blob {digest[:19]} of the base image layout {self.folder} has sha256 {sha256_bytes(data)[:12]}: "
                "it is not the blob its name says",
                _BASE_HINT,
            )
        return data

    def document(self, digest: Any, what: str, size: Any = None) -> tuple[bytes, dict[str, Any]]:
        data = self.blob(digest, what, size)
        try:
            parsed = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError):
            parsed = None
        if not isinstance(parsed, dict):
            raise MissingInput(f"the base's {what} {str(digest)[:19]} is not a JSON object", _BASE_HINT)
        return data, parsed

    def check(self) -> None:
        """The folder is an OCI image layout holding the blob of ``digest``, an image index or manifest."""
        if not (self.folder / LAYOUT_FILE).is_file():
            raise MissingInput(f"{self.folder} is not an OCI image layout (no {LAYOUT_FILE} file)", _BASE_HINT)
        self._top()

    def _top(self) -> tuple[bytes, dict[str, Any], str]:
        """The blob ``digest`` names, its JSON and its kind (an image index or manifest), or one line."""
        data, top = self.document(self.digest, "image index or manifest")
        kind = _kind(top)
        if kind is None:
            raise MissingInput(
                f"the base {self.digest[:19]} is neither an image index nor an image manifest", _BASE_HINT
            )
        return data, top, kind

    def image(self, platform: Platform) -> BaseImage:
        """The base's image of ``platform``: the manifest ``digest`` names (its configuration's platform must be
        ``platform``) or the one its index lists for ``platform`` (a base without a variant matches any)."""
        data, top, kind = self._top()
        named: tuple[Blob, ...] = ()
        if kind == MEDIA_INDEX:
            listed = [
                d for d in top.get("manifests") or [] if isinstance(d, dict) and _matches(d.get("platform"), platform)
            ]
            if not listed:
                found = [platform_text(d.get("platform")) for d in top.get("manifests") or [] if isinstance(d, dict)]
                raise MissingInput(
                    f"the base {self.digest[:19]} has no {platform} image (it has {', '.join(found) or 'none'})",
                    "give a base with an image of every glibc target's platform",
                )
            named = (Blob(MEDIA_INDEX, data),)
            data, top = self.document(listed[0].get("digest"), f"{platform} manifest", listed[0].get("size"))
        described = _object(top.get("config"))
        config_data, config = self.document(described.get("digest"), f"{platform} configuration", described.get("size"))
        if not _matches(config, platform):
            raise MissingInput(
                f"the base {self.digest[:19]} is an image of {platform_text(config)}, not {platform}",
                "give a base with an image of every glibc target's platform",
            )
        layers = tuple(d for d in top.get("layers") or [] if isinstance(d, dict))
        blobs = tuple(
            Blob(str(d.get("mediaType")), self.blob(d.get("digest"), f"{platform} layer", d.get("size")))
            for d in layers
        )
        self._check_members(platform, blobs)
        rootfs = config.get("rootfs")
        diff_ids = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
        if not isinstance(diff_ids, list) or len(diff_ids) != len(layers):
            raise MissingInput(
                f"the base's {platform} configuration lists {len(diff_ids or [])} layers, its manifest {len(layers)}",
                _BASE_HINT,
            )
        manifest = Blob(MEDIA_MANIFEST, data)
        config_blob = Blob(MEDIA_CONFIG, config_data)
        return BaseImage(self.digest, manifest, config_blob, layers, (*named, manifest, config_blob, *blobs))

    def _check_members(self, platform: Platform, layers: Sequence[Blob]) -> None:
        """Every member of the base's ``layers`` (lowest first) inside the image's root (recipes/release/reproducible/
        base_layers.py), or one line naming the layer and the member."""
        links: set[str] = set()
        for layer in layers:
            problem = layer_problem(layer.data, links)
            if problem is not None:
                raise MissingInput(
                    f"the base's {platform} layer {layer.digest[:19]}: {problem}; unpacked on a host, it could write "
                    "outside its folder",
                    "give a base whose layers stay inside the image's root (docs/releases.md, \"What a base's layers "
                    'may hold")',
                )


def _kind(document: Mapping[str, Any]) -> str | None:
    media = document.get("mediaType")
    if media == MEDIA_INDEX or (media is None and isinstance(document.get("manifests"), list)):
        return MEDIA_INDEX
    if media == MEDIA_MANIFEST or (media is None and isinstance(document.get("layers"), list)):
        return MEDIA_MANIFEST
    return None


def _matches(fields: Any, platform: Platform) -> bool:
    if not isinstance(fields, dict):
        return False
    variant = fields.get("variant")
    return (
        fields.get("os") == platform.os
        and fields.get("architecture") == platform.architecture
        and (not variant or variant == platform.variant)
    )


def platform_text(fields: Any) -> str:
    if not isinstance(fields, dict):
        return "no platform"
    return "/".join(str(fields[k]) for k in ("os", "architecture", "variant") if fields.get(k))


@dataclass(frozen=True)
class ImageBlobs:
    """The three blobs of one image."""

    layer: Blob
    config: Blob
    manifest: Blob


def layer_tar(name: str, binary: bytes, mtime: int) -> bytes:
    """The one layer of an image: the binary at ``/<name>``, mode 0755, owner 0, ``mtime``; nothing else."""
    if "/" in name or name in ("", ".", ".."):
        raise ValueError(f"{name!r} is not a file name")
    return tar_bytes({name: (binary, BINARY_MODE)}, mtime, tarfile.USTAR_FORMAT)


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def image_blobs(image: Image) -> ImageBlobs:
    """The layer, configuration and manifest of ``image``."""
    layer = Blob(MEDIA_LAYER, layer_tar(image.name, image.binary, image.created))
    base = image.base.config_json() if image.base else {}
    inherited = _object(base.get("config"))
    labels = _object(inherited.get("Labels"))
    rootfs = _object(base.get("rootfs"))
    found = base.get("history")
    history: list[Any] = found if isinstance(found, list) else []
    kept = {k: v for k, v in inherited.items() if k not in ("Cmd", "Entrypoint", "Labels")}  # ENTRYPOINT drops Cmd
    config = Blob(
        MEDIA_CONFIG,
        canonical_json(
            {
                **{k: v for k, v in base.items() if k not in ("created", "config", "rootfs", "history")},
                **image.platform.fields(),
                "created": rfc3339(image.created),
                "config": {**kept, "Entrypoint": [f"/{image.name}"], "Labels": {**labels, **image.labels}},
                # uncompressed: its digest is its diff id
                "rootfs": {"type": "layers", "diff_ids": [*(rootfs.get("diff_ids") or []), layer.digest]},
                "history": [
                    *history,
                    {"created": rfc3339(image.created), "created_by": f"COPY {image.name} /{image.name}"},
                ],
            }
        ),
    )
    manifest = Blob(
        MEDIA_MANIFEST,
        canonical_json(
            {
                "schemaVersion": 2,
                "mediaType": MEDIA_MANIFEST,
                "config": config.descriptor(),
                "layers": [*(image.base.layers if image.base else ()), layer.descriptor()],
                **({"annotations": {BASE_DIGEST: image.base.manifest.digest}} if image.base else {}),
            }
        ),
    )
    return ImageBlobs(layer, config, manifest)


@dataclass(frozen=True)
class Layout:
    """An OCI image layout: its files by path (``oci-layout``, ``index.json``, ``blobs/sha256/<hex>``), the image
    index's digest and each platform's image blobs."""

    files: dict[str, bytes]
    index_digest: str
    images: tuple[tuple[Platform, ImageBlobs], ...]


def image_layout(images: Sequence[Image], ref_name: str, annotations: Mapping[str, str]) -> Layout:
    """The layout of ``images`` (one per platform, in the image index by architecture and variant), the image index
    annotated with ``annotations`` and named ``ref_name`` in ``index.json``."""
    platforms = [str(image.platform) for image in images]
    twice = sorted({p for p in platforms if platforms.count(p) > 1})
    if twice:
        raise ValueError(f"two images of {twice[0]}")
    ordered = sorted(images, key=lambda image: (image.platform.architecture, image.platform.variant or ""))
    made = tuple((image.platform, image_blobs(image)) for image in ordered)
    index = Blob(
        MEDIA_INDEX,
        canonical_json(
            {
                "schemaVersion": 2,
                "mediaType": MEDIA_INDEX,
                "manifests": [blobs.manifest.descriptor(platform=platform.fields()) for platform, blobs in made],
                "annotations": dict(annotations),
            }
        ),
    )
    top = {
        "schemaVersion": 2,
        "mediaType": MEDIA_INDEX,
        "manifests": [index.descriptor(annotations={REF_NAME: ref_name})],
    }
    blobs = [index, *(blob for _, b in made for blob in (b.layer, b.config, b.manifest))]
    blobs += [blob for image in ordered if image.base for blob in image.base.blobs]
    files = {
        LAYOUT_FILE: canonical_json({"imageLayoutVersion": LAYOUT_VERSION}),
        "index.json": canonical_json(top),
        **{f"blobs/sha256/{blob.digest.removeprefix('sha256:')}": blob.data for blob in blobs},
    }
    return Layout(files, index.digest, made)
