"""The OCI image layout writer (recipes/release/reproducible/oci.py) and what ``nox -s image`` writes with it: the
layer's tar
byte for byte (sorted, owner 0, one mtime, modes), canonical JSON, the blobs named by their digests, one digest for
the same images in any order, the platforms of Rust's triples, the image session's posargs, and a layout that
fails while it is written leaving nothing behind."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any

import pytest

from recipes.errors import ConfigError
from recipes.release.args import parse_image
from recipes.release.make import write_dir
from recipes.release.reproducible import sha256_bytes
from recipes.release.reproducible.oci import (
    MEDIA_CONFIG,
    MEDIA_INDEX,
    MEDIA_LAYER,
    MEDIA_MANIFEST,
    REF_NAME,
    Image,
    Platform,
    canonical_json,
    image_layout,
    layer_tar,
    platform_of,
    rfc3339,
)
from recipes.release.reproducible.tarballs import tar_bytes, tarball_bytes

SDE = 1772600767  # 2026-03-04T05:06:07Z, the test repositories' commit time
AMD64 = Platform("linux", "amd64")
ARM64 = Platform("linux", "arm64", "v8")


def _images(labels: dict[str, str] | None = None) -> list[Image]:
    labels = labels if labels is not None else {"org.opencontainers.image.revision": "abc"}
    return [
        Image(AMD64, "hello-pgo", b"\x7fELF x86_64", labels, SDE),
        Image(ARM64, "hello-pgo", b"\x7fELF aarch64", labels, SDE),
    ]


def _json(data: bytes) -> dict[str, Any]:
    loaded = json.loads(data)
    assert isinstance(loaded, dict)
    return loaded


def test_the_layer_is_the_binary_alone_owned_by_root_at_one_time() -> None:
    layer = layer_tar("hello-pgo", b"\x7fELF binary", SDE)
    # pinned: the layer's bytes are its digest, which the release's users compare
    assert sha256_bytes(layer) == "c398708715ca403ba67dd919befe0851e8fba9adbb284e21f88418fb35908c44"
    assert len(layer) % 512 == 0
    with tarfile.open(fileobj=io.BytesIO(layer), mode="r:") as tar:
        members = tar.getmembers()
        assert [m.name for m in members] == ["hello-pgo"]
        member = members[0]
        assert (member.mode, member.uid, member.gid, member.uname, member.gname) == (0o755, 0, 0, "", "")
        assert member.mtime == SDE and member.isreg()
        stream = tar.extractfile(member)
        assert stream is not None and stream.read() == b"\x7fELF binary"
    assert b"ustar\x0000" in layer[:512]  # plain ustar: no PAX header (which may carry a pid or a time)
    for bad in ("usr/bin/hello", "", "..", "."):
        with pytest.raises(ValueError, match="is not a file name"):
            layer_tar(bad, b"x", SDE)


def test_the_umask_and_the_order_given_change_no_byte() -> None:
    files = {"b/two": (b"2", 0o644), "a/one": (b"1", 0o755), "a/z": (b"z", 0o600)}
    old = os.umask(0o077)
    try:
        first = tar_bytes(files, SDE)
    finally:
        os.umask(old)
    assert tar_bytes(dict(reversed(list(files.items()))), SDE) == first
    with tarfile.open(fileobj=io.BytesIO(first), mode="r:") as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["a", "a/one", "a/z", "b", "b/two"]  # sorted, directories made
    assert [oct(m.mode) for m in members] == ["0o755", "0o755", "0o600", "0o755", "0o644"]
    assert {m.mtime for m in members} == {SDE}
    assert tar_bytes(files, SDE + 1) != first
    # the release's tarball is the same tar in gzip (mtime 0, no name): splitting tar_bytes out changed no byte
    packed = tarball_bytes(files, SDE)
    assert gzip.decompress(packed) == first
    assert packed[4:8] == b"\0\0\0\0" and packed[3] & 0x08 == 0  # gzip MTIME 0, no FNAME flag


def test_canonical_json_and_the_time() -> None:
    assert canonical_json({"b": 1, "a": {"d": [1, 2], "c": "é"}}) == '{"a":{"c":"é","d":[1,2]},"b":1}'.encode()
    assert rfc3339(SDE) == "2026-03-04T05:06:07Z"
    assert rfc3339(0) == "1970-01-01T00:00:00Z"


def test_the_platform_of_a_triple() -> None:
    assert platform_of("x86_64-unknown-linux-musl") == AMD64
    assert platform_of("x86_64-unknown-linux-gnu") == AMD64
    assert platform_of("aarch64-unknown-linux-musl") == ARM64
    assert str(ARM64) == "linux/arm64/v8" and str(AMD64) == "linux/amd64"
    assert ARM64.fields() == {"os": "linux", "architecture": "arm64", "variant": "v8"}
    assert AMD64.fields() == {"os": "linux", "architecture": "amd64"}
    assert platform_of("armv7-unknown-linux-musleabihf") == Platform("linux", "arm", "v7")
    assert platform_of("riscv64gc-unknown-linux-gnu") == Platform("linux", "riscv64")
    for other in ("x86_64-pc-windows-msvc", "aarch64-apple-darwin", "x86_64-unknown-freebsd", "mips-unknown-linux-gnu"):
        assert platform_of(other) is None, other


def test_the_layout_its_blobs_and_one_digest_for_the_same_images() -> None:
    layout = image_layout(_images(), "v1.0.0", {"org.opencontainers.image.version": "1.0.0"})
    files = layout.files
    assert _json(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    for name, data in files.items():
        if name.startswith("blobs/"):
            assert name == f"blobs/sha256/{sha256_bytes(data)}"
    assert len(files) == 2 + 1 + 2 * 3  # oci-layout, index.json, the image index, each image's three blobs
    top = _json(files["index.json"])
    assert top["mediaType"] == MEDIA_INDEX
    (entry,) = top["manifests"]
    assert entry["digest"] == layout.index_digest and entry["mediaType"] == MEDIA_INDEX
    assert entry["annotations"] == {REF_NAME: "v1.0.0"}
    index = _json(files[f"blobs/sha256/{layout.index_digest.removeprefix('sha256:')}"])
    assert entry["size"] == len(files[f"blobs/sha256/{layout.index_digest.removeprefix('sha256:')}"])
    assert index["annotations"] == {"org.opencontainers.image.version": "1.0.0"}
    platforms = [m["platform"] for m in index["manifests"]]
    assert platforms == [AMD64.fields(), ARM64.fields()]
    for descriptor, (platform, blobs) in zip(index["manifests"], layout.images, strict=True):
        assert descriptor["digest"] == blobs.manifest.digest and descriptor["mediaType"] == MEDIA_MANIFEST
        manifest = _json(blobs.manifest.data)
        assert manifest["config"] == {
            "mediaType": MEDIA_CONFIG,
            "digest": blobs.config.digest,
            "size": len(blobs.config.data),
        }
        assert manifest["layers"] == [
            {"mediaType": MEDIA_LAYER, "digest": blobs.layer.digest, "size": len(blobs.layer.data)}
        ]
        config = _json(blobs.config.data)
        assert {k: config[k] for k in platform.fields()} == platform.fields()
        assert config["created"] == "2026-03-04T05:06:07Z"
        assert config["config"] == {
            "Entrypoint": ["/hello-pgo"],
            "Labels": {"org.opencontainers.image.revision": "abc"},
        }
        assert config["rootfs"] == {"type": "layers", "diff_ids": [blobs.layer.digest]}
    # pinned, and the same whatever the order of the targets
    assert layout.index_digest == "sha256:12154b3a2170286bc0458d970c0d27b3be8c03620f893e9bf20210bfaf8c4093"
    again = image_layout(list(reversed(_images())), "v1.0.0", {"org.opencontainers.image.version": "1.0.0"})
    assert again.files == files
    # a label, the time, a byte of a binary or the tag: another digest
    changed = [
        image_layout(_images({"org.opencontainers.image.revision": "abd"}), "v1.0.0", {}),
        image_layout([Image(AMD64, "hello-pgo", b"\x7fELF x86_64", {}, SDE + 1)], "v1.0.0", {}),
        image_layout([Image(AMD64, "hello-pgo", b"\x7fELF x86_65", {}, SDE)], "v1.0.0", {}),
    ]
    assert len({layout.index_digest, *(c.index_digest for c in changed)}) == 4
    assert image_layout(_images(), "v1.0.1", {}).index_digest == image_layout(_images(), "v1.0.0", {}).index_digest
    with pytest.raises(ValueError, match="two images of linux/amd64"):
        image_layout([_images()[0], _images()[0]], "v1.0.0", {})


def test_the_image_posargs() -> None:
    args = parse_image(["v1.2.3", "--artefacts", "dist", "--source", "https://example.org/r", "--min-functions", "3"])
    assert (args.tag, args.artefacts, args.source) == ("v1.2.3", Path("dist").absolute(), "https://example.org/r")
    assert args.config == ("--min-functions", "3")
    assert parse_image(["v1.2.3", "--source=https://x.example"]).source == "https://x.example"
    assert parse_image(["v1.2.3"]).source is None


@pytest.mark.refuses("image-source-empty")
def test_an_empty_source_or_no_tag_refused() -> None:
    with pytest.raises(ConfigError, match="--source needs the repository's URL"):
        parse_image(["v1.2.3", "--source="])
    with pytest.raises(ConfigError, match="nox -s image needs a release tag first"):
        parse_image(["--source", "https://example.org"])


def test_a_layout_that_fails_half_written_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "hello-pgo-v1.0.0-image"
    # "blobs" as a file, then a file under it: the second write fails after the first was written
    with pytest.raises(OSError, match=r"Not a directory|File exists"):
        write_dir(out, {"blobs": b"a file", "blobs/sha256/00": b"x", "oci-layout": b"{}"})
    assert list(tmp_path.iterdir()) == []
    layout = image_layout(_images(), "v1.0.0", {})
    write_dir(out, layout.files)
    assert {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()} == set(layout.files)
    assert [p.name for p in tmp_path.iterdir()] == [out.name]
