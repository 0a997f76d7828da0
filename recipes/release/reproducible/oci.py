"""OCI image layouts written byte for byte the same anywhere: one image per platform, FROM scratch, in an image index.

An image of a binary is three blobs: its layer (an uncompressed tar of the binary alone, :func:`tar_bytes`: sorted
entries, owner 0 without names, one mtime), its configuration (platform, entrypoint, labels, the layer's diff id,
``created``) and its manifest (the two descriptors). An image index lists the manifests with their platforms; the
layout is the ``oci-layout`` file, ``index.json`` naming the image index by a tag, and ``blobs/sha256/<hex>``.
Every JSON document is written with sorted keys and no white space, and nothing in it comes from the machine, so
the same binaries, labels and time give the same index digest on any machine and path.

Layers are not compressed: a gzip stream's bytes depend on the zlib that wrote it (zlib-ng and zlib differ), a
tar's only on its entries.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from recipes.release.reproducible.tarballs import sha256_bytes, tar_bytes

MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"
LAYOUT_FILE = "oci-layout"
LAYOUT_VERSION = "1.0.0"
REF_NAME = "org.opencontainers.image.ref.name"
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
class Image:
    """One platform's image: the binary (at ``/<name>``, the entrypoint), its configuration's labels and time."""

    platform: Platform
    name: str
    binary: bytes
    labels: Mapping[str, str]
    created: int


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


def image_blobs(image: Image) -> ImageBlobs:
    """The layer, configuration and manifest of ``image``."""
    layer = Blob(MEDIA_LAYER, layer_tar(image.name, image.binary, image.created))
    config = Blob(
        MEDIA_CONFIG,
        canonical_json(
            {
                **image.platform.fields(),
                "created": rfc3339(image.created),
                "config": {"Entrypoint": [f"/{image.name}"], "Labels": dict(image.labels)},
                "rootfs": {"type": "layers", "diff_ids": [layer.digest]},  # uncompressed: its digest is its diff id
                "history": [{"created": rfc3339(image.created), "created_by": f"COPY {image.name} /{image.name}"}],
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
                "layers": [layer.descriptor()],
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
    files = {
        LAYOUT_FILE: canonical_json({"imageLayoutVersion": LAYOUT_VERSION}),
        "index.json": canonical_json(top),
        **{f"blobs/sha256/{blob.digest.removeprefix('sha256:')}": blob.data for blob in blobs},
    }
    return Layout(files, index.digest, made)
