from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from recipes.errors import StoreError
from recipes.store import ProfileStore, sha256_file


def _profile(tmp_path: Path, content: bytes, name: str = "p.profdata") -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


def test_put_names_by_content_mode_0700(tmp_path: Path) -> None:
    store = ProfileStore(tmp_path / "store")
    stored = store.put(_profile(tmp_path, b"profile one"))
    assert stored.name == sha256_file(stored) + ".profdata"
    assert (store.root.stat().st_mode & 0o777) == 0o700
    assert store.put(_profile(tmp_path, b"profile one", "again.profdata")) == stored
    assert [p.name for p in store.root.iterdir() if not p.name.startswith(".")] == [stored.name]


def test_relative_store_refused() -> None:
    with pytest.raises(StoreError, match="not an absolute path"):
        ProfileStore(Path("relative/store"))


def test_symlinked_store_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(StoreError, match="is a symlink"):
        ProfileStore(tmp_path / "link").ensure()


def test_open_store_refused(tmp_path: Path) -> None:
    root = tmp_path / "open"
    root.mkdir()
    root.chmod(0o777)
    with pytest.raises(StoreError, match=r"mode 0777.*chmod 700"):
        ProfileStore(root).ensure()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give the directory away")
def test_store_of_another_user_refused(tmp_path: Path) -> None:
    root = tmp_path / "theirs"
    root.mkdir(mode=0o700)
    os.chown(root, 4321, 4321)
    with pytest.raises(StoreError, match="owned by uid 4321"):
        ProfileStore(root).ensure()


def test_tampered_store_file_refused_on_put_and_verify(tmp_path: Path) -> None:
    store = ProfileStore(tmp_path / "store")
    profile = _profile(tmp_path, b"the real profile")
    stored = store.put(profile)
    stored.write_bytes(b"something else")
    with pytest.raises(StoreError, match="not the profile its name says"):
        store.verify(stored, "after the build")
    with pytest.raises(StoreError, match="not the profile its name says before the build"):
        store.put(profile)


def test_verify_refuses_a_file_outside_the_store(tmp_path: Path) -> None:
    store = ProfileStore(tmp_path / "store")
    with pytest.raises(StoreError, match="is not a file of the profile store"):
        store.verify(_profile(tmp_path, b"x"), "before the build")


def _writer(args: tuple[str, str, int]) -> str:
    root, source, rounds = args
    store = ProfileStore(Path(root))
    last = ""
    for _ in range(rounds):
        last = str(store.put(Path(source)))
    return last


def test_concurrent_writers_leave_only_whole_files(tmp_path: Path) -> None:
    root = tmp_path / "store"
    big_a = _profile(tmp_path, os.urandom(1 << 20) * 4, "a.profdata")
    big_b = _profile(tmp_path, os.urandom(1 << 20) * 4, "b.profdata")
    jobs = [
        (str(root), str(big_a), 5),
        (str(root), str(big_a), 5),
        (str(root), str(big_b), 5),
        (str(root), str(big_b), 5),
    ]
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        stored = pool.map(_writer, jobs)
    assert len(set(stored)) == 2
    names = sorted(p.name for p in root.iterdir())
    assert names == sorted([".lock", *{Path(s).name for s in stored}])
    for path in map(Path, set(stored)):
        assert path.name == sha256_file(path) + ".profdata"
