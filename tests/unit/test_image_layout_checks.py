"""verify's check of an image layout (recipes/release/image.py:check_layout) on a release written here (the unit
release of test_provenance.py, its glibc target on a base written here, test_oci.py): no cargo. A stray blob is named
before anything reads it, a blob of another size than its descriptor's is refused before it is hashed, and a base
whose layer leaves the image's root is refused both when the image is made and when verify reads it back."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from recipes.errors import PgoError
from recipes.release.image import build_layout, check_layout, read_manifests, record_image
from recipes.release.make import write_dir
from recipes.release.reproducible.oci import Base
from tests.unit.test_oci import DEBIAN_LIKE, _base, _sym, _tar, _within
from tests.unit.test_provenance import publish

TAG = "v1.0.0"
SOURCE = "https://example.org/hello"
LAYOUT = f"hello-pgo-{TAG}-image"


def _imaged(root: Path, base: Base) -> Path:
    """A release with its image on ``base``, as nox -s image writes it (after verify)."""
    dist = publish(root).dist
    manifests = read_manifests(TAG, dist)
    layout, chosen = build_layout(TAG, dist, manifests, SOURCE, base)
    write_dir(dist / LAYOUT, layout.files)
    record_image(dist, TAG, "hello-pgo", layout.files, chosen, SOURCE, base.digest)
    return dist


def _refused(dist: Path) -> str:
    with pytest.raises(PgoError) as refused:
        check_layout(TAG, dist, read_manifests(TAG, dist))
    line = refused.value.line()
    assert "\n" not in line, line
    return line


@pytest.mark.refuses("verify-image-layout-not-what-image-writes", "verify-image-blob-not-its-descriptor-size")
def test_a_stray_blob_is_named_unread_and_a_blob_of_another_size_refused_unhashed(tmp_path: Path) -> None:
    dist = _imaged(tmp_path / "r", _base(tmp_path / "base", *DEBIAN_LIKE))
    lines = check_layout(TAG, dist, read_manifests(TAG, dist))
    assert lines[-1].startswith(f"ok  {LAYOUT}: index sha256:"), lines
    blobs = dist / LAYOUT / "blobs" / "sha256"
    # a stray blob, its bytes not its name's: it was hashed first (103 s for 10 GB) and refused as not its name
    stray = blobs / ("ab" * 32)
    stray.write_bytes(b"not the blob of this name")
    assert _refused(dist) == (
        f"{LAYOUT}/blobs/sha256/{'ab' * 32} is not a file nox -s image writes for this release "
        "(remove the layout and make it again: nox -s image)"
    )
    stray.unlink()
    # the image index, one byte longer: refused by its descriptor's size, before it is read
    top = json.loads((dist / LAYOUT / "index.json").read_bytes())
    index = blobs / str(top["manifests"][0]["digest"]).removeprefix("sha256:")
    size = index.stat().st_size
    with index.open("ab") as more:
        more.write(b" ")
    assert _refused(dist) == (
        f"the image layout's blob {index.name[:12]} (the image index) is {size + 1} bytes, its descriptor says {size} "
        "(remove the layout and make it again: nox -s image)"
    )


@pytest.mark.refuses("image-base-layer-member-outside-root")
def test_a_base_layer_out_of_the_root_is_refused_when_made_and_when_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hostile = (DEBIAN_LIKE[0], _tar(_sym("etc", "/etc")))
    base = _base(tmp_path / "base", *hostile)
    with pytest.raises(PgoError) as refused:  # nox -s image, after verify
        _imaged(tmp_path / "made", base)
    assert refused.value.message.startswith("the base's linux/amd64 layer sha256:"), refused.value.message
    assert refused.value.message.endswith(
        ": the symbolic link 'etc' points to the system folder /etc; unpacked on a host, it could write outside its "
        "folder"
    ), refused.value.message
    assert not (tmp_path / "made" / "repo" / "dist" / TAG / LAYOUT).exists()
    # a forger's tool, which reads no member, wrote the layout and recorded it consistently: verify reads the base
    # back from the layout, and refuses it
    monkeypatch.setattr(Base, "_check_members", lambda *_: None)
    dist = _imaged(tmp_path / "forged", base)
    monkeypatch.undo()
    line = _refused(dist)
    assert line.startswith(f"{LAYOUT}: the base's linux/amd64 layer sha256:"), line
    assert ": the symbolic link 'etc' points to the system folder /etc; unpacked on a host" in line, line
    assert line.endswith("(remove the layout and make it again: nox -s image)"), line


@pytest.mark.refuses("file-not-regular")
def test_a_fifo_for_the_layout_s_index_json_is_refused_not_waited_on(tmp_path: Path) -> None:
    dist = _imaged(tmp_path / "r", _base(tmp_path / "base", *DEBIAN_LIKE))
    index_json = dist / LAYOUT / "index.json"
    index_json.unlink()
    os.mkfifo(index_json)  # read whole, it waited forever for a writer: verify hung
    with _within(10):
        line = _refused(dist)
    assert line == (
        f"the image layout's index.json {index_json} is a fifo, not a file (remove the layout and make it again: nox "
        "-s image)"
    )


@pytest.mark.refuses("image-source-not-http")
def test_a_recorded_source_not_an_http_url_is_refused_by_verify(tmp_path: Path) -> None:
    """A layout and statement written with a source nox -s image refuses (a forger's tool): verify refuses it too."""
    dist = publish(tmp_path).dist
    manifests = read_manifests(TAG, dist)
    base = _base(tmp_path / "base", *DEBIAN_LIKE)
    forged = "javascript:alert(1)"
    layout, chosen = build_layout(TAG, dist, manifests, forged, base)
    write_dir(dist / LAYOUT, layout.files)
    record_image(dist, TAG, "hello-pgo", layout.files, chosen, forged, base.digest)
    assert _refused(dist) == (
        f"{LAYOUT}-index.json.intoto.json records the source 'javascript:alert(1)', not an http(s) URL: its scheme is "
        "javascript, not http or https (download the release's SHA256SUMS and image files again)"
    )
