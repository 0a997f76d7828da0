from __future__ import annotations

import multiprocessing
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

from recipes.errors import StoreError
from recipes.store import ProfileStore, sha256_file
from tests.faults import fill_up, free_bytes, small_tmpfs


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


@pytest.mark.refuses("store-lock-not-file")
@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (Path.mkdir, "a directory"),  # IsADirectoryError from filelock before: a traceback
        (os.mkfifo, "not a file (a fifo, socket or device)"),
        (lambda lock: lock.symlink_to(lock.parent / "elsewhere"), "a symlink"),
    ],
)
def test_a_lock_that_is_not_a_file_is_refused(tmp_path: Path, make: Callable[[Path], object], kind: str) -> None:
    store = ProfileStore(tmp_path / "store")
    store.ensure()
    lock = store.root / ".lock"
    make(lock)
    with pytest.raises(StoreError, match=rf"the profile store's lock {lock} is {re.escape(kind)} \(remove it"):
        store.put(_profile(tmp_path, b"profile one"))
    assert [p.name for p in store.root.iterdir() if p.suffix == ".profdata"] == []


@pytest.mark.refuses("pgo-profile-store-not-absolute-path")
def test_relative_store_refused() -> None:
    with pytest.raises(StoreError, match="not an absolute path"):
        ProfileStore(Path("relative/store"))


@pytest.mark.refuses("store-symlink")
def test_symlinked_store_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(StoreError, match="is a symlink"):
        ProfileStore(tmp_path / "link").ensure()


@pytest.mark.refuses("others-may-write-read-store-not-mode")
def test_open_store_refused(tmp_path: Path) -> None:
    root = tmp_path / "open"
    root.mkdir()
    root.chmod(0o777)
    with pytest.raises(StoreError, match=r"mode 0777.*chmod 700"):
        ProfileStore(root).ensure()


@pytest.mark.refuses("store-owned-another-user")
@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give the directory away")
def test_store_of_another_user_refused(tmp_path: Path) -> None:
    root = tmp_path / "theirs"
    root.mkdir(mode=0o700)
    os.chown(root, 4321, 4321)
    with pytest.raises(StoreError, match="owned by uid 4321"):
        ProfileStore(root).ensure()


@pytest.mark.refuses("store-file-not-profile-name-says-before")
def test_tampered_store_file_refused_on_put_and_verify(tmp_path: Path) -> None:
    store = ProfileStore(tmp_path / "store")
    profile = _profile(tmp_path, b"the real profile")
    stored = store.put(profile)
    stored.write_bytes(b"something else")
    with pytest.raises(StoreError, match="not the profile its name says"):
        store.verify(stored, "after the build")
    with pytest.raises(StoreError, match="not the profile its name says before the build"):
        store.put(profile)


@pytest.mark.refuses("path-not-file-store")
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


# --- the store's parents ------------------------------------------------------------------------------------


@pytest.mark.refuses("parent-others-may-write-without-sticky-bit")
@pytest.mark.parametrize(("mode", "who"), [(0o777, "its group and others"), (0o757, "others"), (0o775, "its group")])
def test_store_inside_a_parent_others_may_write_refused(tmp_path: Path, mode: int, who: str) -> None:
    parent = tmp_path / "shared"
    parent.mkdir()
    parent.chmod(mode)
    store = ProfileStore(parent / "store")
    pattern = rf"inside {parent}, which {who} may write \(mode {mode:04o}, no sticky bit\).*chmod go-w {parent}"
    with pytest.raises(StoreError, match=pattern):
        store.check()
    assert not store.root.exists()  # the check creates nothing
    with pytest.raises(StoreError, match=pattern):
        store.put(_profile(tmp_path, b"profile"))
    assert not store.root.exists()


@pytest.mark.refuses("parent-others-may-write-without-sticky-bit")
def test_a_writable_grandparent_is_refused_too(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    (shared / "mine").mkdir(parents=True)
    shared.chmod(0o777)
    (shared / "mine").chmod(0o700)
    with pytest.raises(StoreError, match=f"inside {shared}, which its group and others may write"):
        ProfileStore(shared / "mine" / "store").ensure()


def test_a_sticky_parent_like_tmp_is_accepted(tmp_path: Path) -> None:
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    store = ProfileStore(sticky / "store")
    store.check()
    stored = store.put(_profile(tmp_path, b"profile"))
    assert stored.parent == store.root


@pytest.mark.refuses("parent-others-may-write-without-sticky-bit")
def test_a_writable_parent_behind_a_symlink_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real-shared"
    real.mkdir()
    real.chmod(0o777)
    (tmp_path / "nice-name").symlink_to(real)
    link = tmp_path / "nice-name"
    with pytest.raises(StoreError, match=rf"inside {link} \(a symlink to {real}\), which .*chmod go-w {real} "):
        ProfileStore(link / "store").check()


def test_check_creates_nothing_and_accepts_a_store_to_be_made(tmp_path: Path) -> None:
    store = ProfileStore(tmp_path / "a" / "b" / "store")
    store.check()
    assert not (tmp_path / "a").exists()


@pytest.mark.refuses("store-symlink", "others-may-write-read-store-not-mode")
def test_check_refuses_an_existing_unsafe_store(tmp_path: Path) -> None:
    root = tmp_path / "open"
    root.mkdir()
    root.chmod(0o755)
    with pytest.raises(StoreError, match=r"mode 0755.*chmod 700"):
        ProfileStore(root).check()
    (tmp_path / "link").symlink_to(root)
    with pytest.raises(StoreError, match="is a symlink"):
        ProfileStore(tmp_path / "link").check()


def test_missing_parents_are_made_0700_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o002)
    try:
        store = ProfileStore(tmp_path / "a" / "b" / "store")
        store.put(_profile(tmp_path, b"profile"))
    finally:
        os.umask(old)
    for directory in (tmp_path / "a", tmp_path / "a" / "b", store.root):
        assert (directory.stat().st_mode & 0o777) == 0o700


@pytest.mark.refuses("parent-store-not-directory")
def test_a_parent_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match=f"{tmp_path / 'file'}, a parent of profile store .* is not a directory"):
        ProfileStore(tmp_path / "file" / "store").check()


# --- StrictModes: who owns the way to the store ------------------------------------------------------------

needs_root = pytest.mark.skipif(os.getuid() != 0, reason="needs root to give directories away")
#: a uid no user has, and nobody's
OTHER, NOBODY = 4242, 65534


def _theirs(path: Path, mode: int = 0o755, uid: int = OTHER) -> Path:
    path.mkdir()
    path.chmod(mode)
    os.chown(path, uid, uid)
    return path


def _as_uid(uid: int, cwd: Path, *argv: str) -> None:
    """``argv`` run as ``uid`` in ``cwd`` (entered before the uid is dropped: the test's parents are root's 0700)."""
    subprocess.run(argv, cwd=cwd, user=uid, group=uid, extra_groups=[], check=True, capture_output=True)


@pytest.mark.refuses("directory-symlink-way-store-written-resolved-neither")
@needs_root
@pytest.mark.parametrize("mode", [0o755, 0o700, 0o1777], ids=["0755", "0700", "1777"])
def test_a_parent_of_another_user_is_refused_whatever_its_mode(tmp_path: Path, mode: int) -> None:
    """Its owner may rename the store away and put another in its place, sticky bit or not."""
    parent = _theirs(tmp_path / "theirs", mode)
    store = ProfileStore(parent / "store")
    pattern = (
        rf"^profile store {store.root} is inside {parent} \(mode {mode:04o}\), owned by uid 4242 \(no user of that "
        rf"uid\), not by you \(uid 0\) or root: that user could replace the store and its profiles "
        rf"\(chown root {parent} \(as root\), or choose a PGO_PROFILE_STORE whose parent directories are all "
        r"yours or root's\)$"
    )
    with pytest.raises(StoreError) as caught:
        store.check()
    assert re.match(pattern, caught.value.line()), caught.value.line()
    with pytest.raises(StoreError, match="owned by uid 4242"):
        store.put(_profile(tmp_path, b"profile"))
    assert not store.root.exists()


@pytest.mark.refuses("directory-symlink-way-store-written-resolved-neither")
@needs_root
def test_a_grandparent_of_nobody_is_refused_by_name(tmp_path: Path) -> None:
    theirs = _theirs(tmp_path / "theirs", 0o755, NOBODY)
    (theirs / "mine").mkdir(mode=0o700)
    os.chown(theirs / "mine", 0, 0)
    with pytest.raises(StoreError, match=rf"inside {theirs} \(mode 0755\), owned by nobody \(uid 65534\)"):
        ProfileStore(theirs / "mine" / "store").check()


@pytest.mark.refuses("directory-symlink-way-store-written-resolved-neither")
@needs_root
def test_a_directory_of_another_user_under_a_sticky_one_is_refused(tmp_path: Path) -> None:
    """Under /tmp (root's, sticky) only the store's own way counts: there it must be yours or root's."""
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    theirs = _theirs(sticky / "theirs", 0o700)
    with pytest.raises(StoreError, match=rf"inside {theirs} \(mode 0700\), owned by uid 4242"):
        ProfileStore(theirs / "store").check()
    mine = sticky / "mine"
    mine.mkdir(mode=0o700)
    ProfileStore(mine / "store").put(_profile(tmp_path, b"profile"))  # beside theirs, ours is fine


@pytest.mark.refuses("directory-symlink-way-store-written-resolved-neither")
@needs_root
def test_a_symlink_of_another_user_on_the_way_is_refused(tmp_path: Path) -> None:
    """In a sticky directory the owner of a symlink may replace it (and so point the store elsewhere)."""
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = sticky / "link"
    link.symlink_to(real)
    os.lchown(link, OTHER, OTHER)
    with pytest.raises(
        StoreError,
        match=rf"reached through the symlink {link} -> {real} \(mode 0777\), owned by uid 4242 .*chown -h root {link}",
    ):
        ProfileStore(link / "store").check()


@pytest.mark.refuses("directory-symlink-way-store-written-resolved-neither")
@needs_root
def test_a_symlink_to_a_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    theirs = _theirs(tmp_path / "theirs", 0o755)
    (tmp_path / "mine").symlink_to(theirs)
    link = tmp_path / "mine"
    with pytest.raises(StoreError, match=rf"inside {link} \(a symlink to {theirs}\) \(mode 0755\), owned by uid"):
        ProfileStore(link / "store").check()


@pytest.mark.refuses("parent-others-may-write-without-sticky-bit")
def test_a_symlink_through_a_relative_target_and_dot_dot_is_followed(tmp_path: Path) -> None:
    """The walk resolves as the kernel does: a relative target with ``..`` lands on the writable directory."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (tmp_path / "a").mkdir(mode=0o700)
    (tmp_path / "a" / "up").symlink_to("../shared")
    with pytest.raises(StoreError, match=rf"inside {tmp_path / 'a' / 'up'} \(a symlink to {shared}\), which its"):
        ProfileStore(tmp_path / "a" / "up" / "store").check()


@pytest.mark.refuses("more-40-symlinks-way-store")
def test_a_loop_of_symlinks_is_refused(tmp_path: Path) -> None:
    (tmp_path / "one").symlink_to(tmp_path / "two")
    (tmp_path / "two").symlink_to(tmp_path / "one")
    with pytest.raises(StoreError, match=r"more than 40 symlinks on the way to profile store"):
        ProfileStore(tmp_path / "one" / "store").check()


@pytest.mark.refuses("parent-others-may-write-without-sticky-bit")
def test_a_group_writable_parent_is_refused_even_if_the_group_is_yours(tmp_path: Path) -> None:
    """The Fedora-style private group (umask 002): refused, and the hint says why."""
    parent = tmp_path / "private-group"
    parent.mkdir()
    parent.chmod(0o775)
    os.chown(parent, os.getuid(), os.getgid())
    with pytest.raises(StoreError) as caught:
        ProfileStore(parent / "store").check()
    line = caught.value.line()
    assert f"is inside {parent}, which its group may write (mode 0775, no sticky bit), owned by root (uid 0)" in line
    assert "a group-writable directory is refused even when the group is your own" in line


@pytest.mark.refuses("way-store-changed-between-plan-check-re")
@needs_root
def test_a_parent_given_away_after_the_check_is_refused_after_the_build(tmp_path: Path) -> None:
    """The swap of issue 19, made for real: the check passes; the parent is then another user's, who (as that uid)
    renames the store away, puts a directory of theirs holding another profile under the same name, and puts the
    real one back. The re-hash alone passes; the check of the way to the store, made with it, refuses."""
    parent = tmp_path / "parent"
    parent.mkdir(mode=0o755)
    store = ProfileStore(parent / "store")
    stored = store.put(_profile(tmp_path, b"the honest profile"))
    store.check()
    store.verify(stored, "before the build")

    os.chown(parent, OTHER, OTHER)
    fake = _theirs(parent / "fake", 0o700)
    (fake / stored.name).write_bytes(b"another profile")
    _as_uid(OTHER, parent, "mv", "store", "store.real")
    _as_uid(OTHER, parent, "mv", "fake", "store")
    assert stored.read_bytes() == b"another profile"  # what rustc reads meanwhile
    _as_uid(OTHER, parent, "mv", "store", "fake")
    _as_uid(OTHER, parent, "mv", "store.real", "store")
    assert stored.name == sha256_file(stored) + ".profdata"  # the re-hash alone would pass

    with pytest.raises(StoreError) as caught:
        store.verify(stored, "after the build")
    line = caught.value.line()
    assert line.startswith(
        f"profile store {store.root} (after the build) is inside {parent} (mode 0755), owned by uid 4242"
    ), line
    assert "\n" not in line


@pytest.mark.refuses("store-gone-re-hash")
def test_a_store_gone_after_the_build_is_refused(tmp_path: Path) -> None:
    store = ProfileStore(tmp_path / "store")
    stored = store.put(_profile(tmp_path, b"profile"))
    store.root.rename(tmp_path / "elsewhere")
    with pytest.raises(StoreError, match=rf"profile store {store.root} is gone after the build \(was it moved"):
        store.verify(stored, "after the build")


# --- a full disk --------------------------------------------------------------------------------------------


@pytest.mark.refuses("no-space-left-write-profile-into-store")
def test_full_disk_while_writing_a_profile_leaves_nothing_partial(tmp_path: Path) -> None:
    profile = _profile(tmp_path, os.urandom(200_000))
    with small_tmpfs(tmp_path / "small", size="64k") as small:
        store = ProfileStore(small / "store")
        with pytest.raises(StoreError) as caught:
            store.put(profile)
        line = caught.value.line()
        assert "\n" not in line
        assert f"no space left to write the profile {profile} (200000 bytes)" in line
        assert f"into the profile store {store.root}" in line
        assert "free space or choose another PGO_PROFILE_STORE" in line
        # no temp file, no partial profile: only the lock
        assert sorted(p.name for p in store.root.iterdir()) == [".lock"]
        # with room again, the same store takes the profile whole
        fill = fill_up(small)
        fill.unlink()
        small_profile = _profile(tmp_path, os.urandom(10_000), "small.profdata")
        stored = store.put(small_profile)
        assert stored.name == sha256_file(small_profile) + ".profdata"


@pytest.mark.refuses("no-space-left-write-profile-into-store")
def test_full_disk_before_the_first_byte(tmp_path: Path) -> None:
    profile = _profile(tmp_path, b"a profile of a few bytes")
    with small_tmpfs(tmp_path / "small", size="64k") as small:
        store = ProfileStore(small / "store")
        store.ensure()
        fill_up(small)
        assert free_bytes(small) == 0
        with pytest.raises(StoreError, match=r"no space left .* 0 bytes free there"):
            store.put(profile)
        assert sorted(p.name for p in store.root.iterdir()) == [".lock"]


# --- the store itself ---------------------------------------------------------------------------------------


@pytest.mark.refuses("store-path-has-white-space")
@pytest.mark.parametrize("name", ["my profiles", "profiles\tstore", "store\n"])
def test_a_store_path_with_white_space_is_refused(tmp_path: Path, name: str) -> None:
    """rustc's -Cprofile-use=<store path> goes through the per-target rustflags variable, which cargo splits on
    white space."""
    with pytest.raises(StoreError, match=r"has white space in its path \(choose a path without spaces\)"):
        ProfileStore(tmp_path / name)


@pytest.mark.refuses("store-not-directory")
def test_a_store_that_is_a_file_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "store"
    root.write_text("not a directory")
    store = ProfileStore(root)
    pattern = rf"profile store {re.escape(str(root))} is not a directory \(remove it or choose another path\)"
    with pytest.raises(StoreError, match=pattern):
        store.check()
    with pytest.raises(StoreError, match=pattern):
        store.put(_profile(tmp_path, b"profile"))
    assert root.read_text() == "not a directory"


@pytest.mark.refuses("store-cannot-looked", "store-cannot-created")
def test_a_store_whose_name_is_too_long_to_look_at_is_refused(tmp_path: Path) -> None:
    """A name longer than the filesystem's 255 bytes: lstat and mkdir fail with ENAMETOOLONG."""
    store = ProfileStore(tmp_path / ("s" * 300))
    with pytest.raises(StoreError, match=r"cannot look at profile store .*: File name too long \(check its path\)"):
        store.check()
    with pytest.raises(StoreError, match=r"cannot create profile store .*: File name too long \(.*choose another"):
        store.ensure()


@pytest.mark.refuses("parent-store-cannot-looked")
def test_a_parent_too_long_to_look_at_is_refused(tmp_path: Path) -> None:
    parent = tmp_path / ("p" * 300)
    with pytest.raises(StoreError, match=rf"cannot look at {parent}, a parent of profile store .*File name too long"):
        ProfileStore(parent / "store").check()


@pytest.mark.refuses("store-cannot-created", "store-parent-not-writable")
def test_a_store_in_a_read_only_directory_is_refused(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "ro", read_only=True) as ro:
        store = ProfileStore(ro / "store")
        with pytest.raises(StoreError, match=rf"cannot create profile store {store.root}: {ro} is not writable"):
            store.check()
        with pytest.raises(
            StoreError, match=rf"cannot create profile store {store.root}: Read-only file system \({store.root}\)"
        ):
            store.put(_profile(tmp_path, b"profile"))
        assert not store.root.exists()


def test_a_file_of_another_suffix_is_a_programming_error(tmp_path: Path) -> None:
    """The callers pass the store's own suffixes: another is an error of the code (a ValueError, with its
    traceback), not a refusal of the user's input."""
    store = ProfileStore(tmp_path / "store")
    with pytest.raises(ValueError, match=r"suffix '\.profraw' is not one of \.profdata, \.fdata"):
        store.put(_profile(tmp_path, b"raw", "p.profraw"), ".profraw")
    assert not store.root.exists()


@pytest.mark.refuses("store-file-missing-symlink")
def test_a_store_file_missing_or_a_symlink_is_refused(tmp_path: Path) -> None:
    store = ProfileStore(tmp_path / "store")
    profile = _profile(tmp_path, b"the profile")
    stored = store.put(profile)
    stored.unlink()
    with pytest.raises(StoreError, match=rf"store file {stored} is missing or a symlink after the build"):
        store.verify(stored, "after the build")
    stored.symlink_to(profile)  # the very bytes its name says, but behind a link anyone could repoint
    with pytest.raises(StoreError, match=rf"store file {stored} is missing or a symlink before the build"):
        store.put(profile)
    assert stored.is_symlink()


@pytest.mark.refuses("store-stayed-locked")
def test_a_store_that_stays_locked_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another pipeline holds the store's lock (here: a second lock on the same file) past the timeout, which is
    shortened to a second."""
    store = ProfileStore(tmp_path / "store")
    store.ensure()
    monkeypatch.setattr("recipes.store.LOCK_TIMEOUT", 1.0)
    held = FileLock(str(store.root / ".lock"))
    with held, pytest.raises(StoreError, match=rf"profile store {store.root} stayed locked for 1 s.*another pipeline"):
        store.put(_profile(tmp_path, b"profile"))
    assert [p.name for p in store.root.iterdir()] == [".lock"]


@pytest.mark.refuses("store-not-writable")
def test_an_existing_store_on_a_read_only_filesystem_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "ro", mode="0700", read_only=True) as ro, pytest.raises(StoreError) as caught:
        ProfileStore(ro).check()
    assert caught.value.line() == (
        f"profile store {ro} is on a read-only filesystem: the merged profile and its lock are written there "
        "(make it writable, or choose another PGO_PROFILE_STORE)"
    )


@pytest.mark.refuses("store-not-writable")
def test_an_existing_store_without_write_permission_is_refused(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes a directory of mode 0500 all the same")
    store = tmp_path / "store"
    store.mkdir(mode=0o500)
    with pytest.raises(StoreError, match=rf"profile store {store} is not writable"):
        ProfileStore(store).check()
