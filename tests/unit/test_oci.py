"""The OCI image layout writer (recipes/release/reproducible/oci.py) and what ``nox -s image`` writes with it: the
layer's tar
byte for byte (sorted, owner 0, one mtime, modes), canonical JSON, the blobs named by their digests, one digest for
the same images in any order, the platforms of Rust's triples, the image session's posargs, and a layout that
fails while it is written leaving nothing behind."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import signal
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from recipes.errors import ConfigError, MissingInput
from recipes.release.args import check_source, parse_image
from recipes.release.make import write_dir
from recipes.release.reproducible import sha256_bytes
from recipes.release.reproducible.oci import (
    MEDIA_CONFIG,
    MEDIA_INDEX,
    MEDIA_LAYER,
    MEDIA_MANIFEST,
    REF_NAME,
    Base,
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


@pytest.mark.refuses("image-source-not-http")
@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("javascript:alert(1)", "its scheme is javascript, not http or https"),
        ("file:///etc/passwd", "its scheme is file, not http or https"),
        ("ftp://example.org/r", "its scheme is ftp, not http or https"),
        ("example.org/r", "its scheme is missing, not http or https"),
        ("https://example.org/r\nX-Injected: 1", "it holds white space or a control character"),
        ("https://example.org/a b", "it holds white space or a control character"),
        ("https://example.org/\x1b[2J", "it holds white space or a control character"),
        ("https://example.org/\u200b", "it holds white space or a control character"),
        ("https:///r", "it names no host"),
        ("http://[::1/r", "it is not a URL (Invalid IPv6 URL)"),
    ],
)
def test_a_source_not_an_http_url_is_refused_in_one_line(source: str, problem: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_image(["v1.2.3", "--source", source])
    assert refused.value.line() == (
        f"--source {source!r} is not an http(s) URL for the image's source label: {problem} "
        "(write --source https://github.com/OWNER/REPO)"
    )
    assert "\n" not in refused.value.line()
    # a Cargo.toml's repository goes into the same label: the same words, naming it
    with pytest.raises(ConfigError, match=r"^the repository of hello in /c/Cargo.toml, '.*' is not an http\(s\) URL"):
        check_source(source, "the repository of hello in /c/Cargo.toml,")


def test_an_http_source_is_taken() -> None:
    for source in ("https://example.org/r", "HTTP://example.org:8080/a?b=c#d", "https://[::1]/r"):
        assert parse_image(["v1.2.3", "--source", source]).source == source
        assert check_source(source, "x") == source


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


# --- a base image's layout: its blobs read as regular files only, its layers' members inside the image's root -----


def _put(folder: Path, data: bytes) -> str:
    path = folder / "blobs" / "sha256" / sha256_bytes(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return f"sha256:{sha256_bytes(data)}"


def _base(folder: Path, *layers: bytes) -> Base:
    """A base layout written here: an index of one linux/amd64 image of ``layers`` (gzip, as skopeo leaves them)."""
    (folder / "oci-layout").parent.mkdir(parents=True, exist_ok=True)
    (folder / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    packed = [gzip.compress(layer, mtime=0) for layer in layers]
    config = canonical_json(
        {
            "architecture": "amd64",
            "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{sha256_bytes(layer)}" for layer in layers]},
        }
    )
    layer_type = f"{MEDIA_LAYER}+gzip"
    manifest = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": MEDIA_MANIFEST,
            "config": {"mediaType": MEDIA_CONFIG, "digest": _put(folder, config), "size": len(config)},
            "layers": [{"mediaType": layer_type, "digest": _put(folder, one), "size": len(one)} for one in packed],
        }
    )
    listed = {"mediaType": MEDIA_MANIFEST, "digest": _put(folder, manifest), "size": len(manifest)}
    index = canonical_json({"schemaVersion": 2, "manifests": [{**listed, "platform": AMD64.fields()}]})
    return Base(folder, _put(folder, index))


def _tar(*members: tarfile.TarInfo) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for member in members:
            tar.addfile(member, io.BytesIO(b"x" * member.size) if member.isreg() else None)
    return out.getvalue()


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    info.size = 1 if kind == tarfile.REGTYPE else 0
    return info


def _dir(name: str) -> tarfile.TarInfo:
    return _member(name, tarfile.DIRTYPE)


def _sym(name: str, to: str) -> tarfile.TarInfo:
    return _member(name, tarfile.SYMTYPE, to)


def _hard(name: str, to: str) -> tarfile.TarInfo:
    return _member(name, tarfile.LNKTYPE, to)


@contextlib.contextmanager
def _within(seconds: int) -> Iterator[None]:
    """The block ends within ``seconds`` or fails (a fifo opened for reading waits forever for a writer)."""

    def late(*_: object) -> None:
        raise AssertionError(f"still waiting after {seconds} s")

    old = signal.signal(signal.SIGALRM, late)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


#: a Debian-like base layer: usrmerge links, absolute links to files and to /run, a hard link, ``./`` names, and a
#: link replaced by a folder in a layer above (a whiteout), then written under
DEBIAN_LIKE = (
    _tar(
        _dir("./usr"),
        _dir("./usr/bin"),
        _member("./usr/bin/dash"),
        _hard("./usr/bin/sh", "./usr/bin/dash"),
        _sym("bin", "usr/bin"),
        _sym("lib64", "usr/lib64"),
        _dir("etc"),
        _sym("etc/localtime", "/usr/share/zoneinfo/Etc/UTC"),
        _sym("etc/mtab", "../proc/self/mounts"),
        _sym("etc/alternatives/awk", "/usr/bin/mawk"),
        _dir("var"),
        _sym("var/run", "/run"),
        _sym("usr/bin/pager", "/etc/alternatives/pager"),
        _sym("opt", "."),
    ),
    _tar(_member("var/.wh.run"), _dir("var/run"), _member("var/run/x.pid"), _sym("var/lock", "/run/lock")),
)


def test_a_base_like_debian_s_is_read(tmp_path: Path) -> None:
    image = _base(tmp_path / "base", *DEBIAN_LIKE).image(AMD64)
    assert len(image.layers) == 2 and len(image.blobs) == 2 + 3  # its index, manifest, config and two layers


@pytest.mark.refuses("image-base-layer-member-outside-root")
@pytest.mark.parametrize(
    ("layers", "words"),
    [
        ((_tar(_member("../../etc/cron.d/x")),), "the member '../../etc/cron.d/x' has a .. part"),
        ((_tar(_member("usr/../../x")),), "the member 'usr/../../x' has a .. part"),
        ((_tar(_member("/etc/passwd")),), "the member '/etc/passwd' is absolute"),
        ((_tar(_hard("shadow", "/etc/shadow")),), "the hard link 'shadow' links to '/etc/shadow', which is absolute"),
        ((_tar(_hard("x", "a/../../x")),), "the hard link 'x' links to 'a/../../x', which has a .. part"),
        ((_tar(_sym("up", "../..")),), "the symbolic link 'up' points to '../..', above the image's root"),
        ((_tar(_sym("a/b/up", "../../../etc")),), "the symbolic link 'a/b/up' points to '../../../etc', above"),
        ((_tar(_sym("etc", "/etc")),), "the symbolic link 'etc' points to the system folder /etc"),
        ((_tar(_sym("h", "//etc/./")),), "the symbolic link 'h' points to the system folder /etc"),
        ((_tar(_sym("root", "/")),), "the symbolic link 'root' points to the system folder /"),
        ((_tar(_sym("x", "usr"), _member("x/passwd")),), "the member 'x/passwd' is written through the symbolic link"),
        (
            (DEBIAN_LIKE[0], _tar(_member("bin/evil"))),
            "the member 'bin/evil' is written through the symbolic link 'bin'",
        ),
        ((_tar(_sym("a", "b"), _sym("a/c", "d")),), "the symbolic link 'a/c' is written through the symbolic link 'a'"),
        ((b"\x28\xb5\x2f\xfd" + b"zstd frame" * 20,), "is not a tar this reads (gzip, bzip2, xz or none;"),
    ],
)
def test_a_base_layer_member_outside_the_root_is_refused(tmp_path: Path, layers: tuple[bytes, ...], words: str) -> None:
    base = _base(tmp_path / "base", *layers)
    with pytest.raises(MissingInput) as refused:
        base.image(AMD64)
    line = refused.value.line()
    assert line.startswith("the base's linux/amd64 layer sha256:"), line
    assert words in line, line
    assert "unpacked on a host, it could write outside its folder" in line, line
    assert line.endswith(
        "(give a base whose layers stay inside the image's root (docs/releases.md, \"What a base's layers may hold\"))"
    ), line


def _layer_path(base: Base) -> Path:
    index = json.loads((base.folder / "blobs" / "sha256" / base.digest.removeprefix("sha256:")).read_bytes())
    manifest_digest = index["manifests"][0]["digest"].removeprefix("sha256:")
    manifest = json.loads((base.folder / "blobs" / "sha256" / manifest_digest).read_bytes())
    return base.folder / "blobs" / "sha256" / str(manifest["layers"][0]["digest"]).removeprefix("sha256:")


@pytest.mark.refuses("image-base-blob-not-a-regular-file")
def test_a_base_blob_that_is_a_fifo_a_link_or_another_size_is_refused_unread(tmp_path: Path) -> None:
    base = _base(tmp_path / "base", DEBIAN_LIKE[0])
    layer = _layer_path(base)
    real = layer.read_bytes()
    # a link to the very bytes the digest names, elsewhere: it was followed and taken
    (tmp_path / "elsewhere").write_bytes(real)
    layer.unlink()
    layer.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(MissingInput) as refused:
        base.image(AMD64)
    assert refused.value.message == (
        f"the blob {'sha256:' + layer.name[:12]} of the base image layout {base.folder} (linux/amd64 layer) is a "
        f"symbolic link (to {tmp_path / 'elsewhere'}), not a regular file"
    )
    layer.unlink()
    os.mkfifo(layer)  # opened, it waited forever for a writer
    with _within(10), pytest.raises(MissingInput) as refused:
        base.image(AMD64)
    assert refused.value.message.endswith(" (linux/amd64 layer) is a fifo, not a regular file"), refused.value.message
    layer.unlink()
    layer.write_bytes(real + b"\0" * 4096)  # checked by its size before it is read and hashed
    with pytest.raises(MissingInput) as refused:
        base.image(AMD64)
    assert refused.value.message.endswith(
        f"(linux/amd64 layer) is {len(real) + 4096} bytes, its descriptor says {len(real)}"
    ), refused.value.message
    layer.write_bytes(real)
    assert base.image(AMD64).layers
