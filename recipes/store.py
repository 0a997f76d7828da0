"""The content-addressed, file-locked profile store.

The optimised build reads its profile from ``<store>/<sha256 of the profile>.profdata``: a path that is
the same wherever that profile is used (cargo hashes rustc's command line, and the path is on it) and
another for another profile (cargo does not look inside the file). Files are written atomically under a
lock, so two pipelines at once leave only whole files, and re-hashed against their names.
"""

from __future__ import annotations

import errno
import hashlib
import os
import pwd
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from recipes.errors import StoreError

SUFFIX = ".profdata"
#: what the store holds: LLVM's instrumentation profiles, and BOLT's (merge-fdata's .fdata)
SUFFIXES = (SUFFIX, ".fdata")
LOCK_NAME = ".lock"
LOCK_TIMEOUT = 120.0


def sha256_file(path: Path) -> str:
    with path.open("rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


def _free_bytes(directory: Path) -> int:
    try:
        info = os.statvfs(directory)
    except OSError:
        return 0
    return info.f_bavail * info.f_frsize


#: the most symlinks followed on the way to the store, as the kernel's ELOOP limit
MAX_SYMLINKS = 40


def _owner(uid: int) -> str:
    """A uid as the refusals name it: ``nobody (uid 65534)``, or ``uid 4242 (no user of that uid)``."""
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid} (no user of that uid)"


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@dataclass
class _Step:
    """A directory or symlink met on the way to the store."""

    path: Path  #: where it is: its parents are all real directories
    info: os.stat_result  #: its lstat
    link_to: str | None = None  #: a symlink's target
    via: Path | None = None  #: the symlink (as written) that resolved to this directory

    @property
    def shown(self) -> str:
        return f"{self.via} (a symlink to {self.path})" if self.via is not None else str(self.path)


@dataclass(frozen=True)
class _Resolved:
    """Put after a symlink's target in the walk: the directory reached then is where the link points."""

    link: Path


def _walk(directory: Path, store: Path) -> list[_Step]:
    """Every directory and symlink from ``/`` down to ``directory``, resolved one component at a time as the
    kernel does (a symlink's own components too), each once; stops at the first that does not exist yet."""
    steps: dict[Path, _Step] = {}
    current = Path("/")
    todo: list[str | _Resolved] = ["/", *directory.parts[1:]]
    hops = 0
    while todo:
        part = todo.pop(0)
        if isinstance(part, _Resolved):
            reached = steps.get(current)
            if reached is not None and reached.via is None and current != part.link:
                reached.via = part.link
            continue
        if part in ("", "."):
            continue
        if part == "..":
            current = current.parent
            continue
        candidate = current / part if part != "/" else Path("/")
        try:
            info = os.lstat(candidate)
        except FileNotFoundError:
            break
        except OSError as exc:
            raise StoreError(
                f"cannot look at {candidate}, a parent of profile store {store}: {exc.strerror}",
                "choose another PGO_PROFILE_STORE",
            ) from exc
        if stat.S_ISLNK(info.st_mode):
            hops += 1
            if hops > MAX_SYMLINKS:
                raise StoreError(
                    f"more than {MAX_SYMLINKS} symlinks on the way to profile store {store}",
                    "choose another PGO_PROFILE_STORE",
                )
            target = str(candidate.readlink())
            steps.setdefault(candidate, _Step(candidate, info, link_to=target))
            if target.startswith("/"):
                current = Path("/")
            todo[:0] = [*Path(target).parts[1 if target.startswith("/") else 0 :], _Resolved(candidate)]
            continue
        if not stat.S_ISDIR(info.st_mode):
            raise StoreError(
                f"{candidate}, a parent of profile store {store}, is not a directory",
                "choose another PGO_PROFILE_STORE",
            )
        steps.setdefault(candidate, _Step(candidate, info))
        current = candidate
    return list(steps.values())


class ProfileStore:
    """A directory of profiles named by their sha256."""

    def __init__(self, root: Path) -> None:
        if not root.is_absolute():
            raise StoreError(f"profile store {root} is not an absolute path", "give PGO_PROFILE_STORE an absolute path")
        if any(ch.isspace() for ch in str(root)):
            raise StoreError(f"profile store {root} has white space in its path", "choose a path without spaces")
        self.root = root

    def check(self) -> None:
        """Check the store without creating it: its parents, and the store itself when it exists.

        This is what the plan checks before anything is built; :meth:`ensure` makes the same checks again
        when a profile is written.
        """
        self._check_parents()
        try:
            os.lstat(self.root)
        except FileNotFoundError:
            self._check_creatable()
            return
        except OSError as exc:
            raise StoreError(f"cannot look at profile store {self.root}: {exc.strerror}", "check its path") from exc
        self._check_root()
        self._check_writable()

    def _check_writable(self) -> None:
        """Every stage that uses the store writes into it (the profile, its lock): a store on a read-only
        filesystem, or one we may not write, is refused before anything is built, not at optimise."""
        try:
            read_only = bool(os.statvfs(self.root).f_flag & os.ST_RDONLY)
        except OSError:
            read_only = False
        if read_only or not os.access(self.root, os.W_OK | os.X_OK):
            problem = "is on a read-only filesystem" if read_only else "is not writable"
            raise StoreError(
                f"profile store {self.root} {problem}: the merged profile and its lock are written there",
                "make it writable, or choose another PGO_PROFILE_STORE",
            )

    def ensure(self) -> None:
        """Create the store (mode 0700) or check the existing one is safe to read profiles from."""
        self._check_parents()
        # Missing parents are made 0700 too: with a umask of 002 they would be group-writable, and refused.
        for directory in (*reversed(self.root.parents), self.root):
            try:
                directory.mkdir(mode=0o700)
            except FileExistsError:
                continue
            except OSError as exc:
                raise StoreError(
                    f"cannot create profile store {self.root}: {exc.strerror} ({directory})",
                    "choose another PGO_PROFILE_STORE",
                ) from exc
        # What changed in between (a parent replaced meanwhile) is refused too.
        self._check_parents()
        self._check_root()

    def _check_parents(self, when: str = "") -> None:
        """StrictModes, as OpenSSH and sudo apply it: every directory from ``/`` down to the store, as written and as
        symlinks resolve it, is owned by root or by you and writable by nobody else; a sticky directory of root's
        or yours (``/tmp``) may be writable by others, as they cannot rename what is not theirs in it. A symlink on
        the way is owned by root or by you too (in a sticky directory its owner could replace it)."""
        me = os.getuid()
        subject = f"profile store {self.root}" + (f" ({when})" if when else "")
        for step in _walk(self.root.parent, self.root):
            mode = stat.S_IMODE(step.info.st_mode)
            owner = _owner(step.info.st_uid)
            if step.info.st_uid not in (0, me):
                if step.link_to is not None:
                    where, chown = f"reached through the symlink {step.path} -> {step.link_to}", "chown -h"
                else:
                    where, chown = f"inside {step.shown}", "chown"
                raise StoreError(
                    f"{subject} is {where} (mode {mode:04o}), owned by {owner}, not by you (uid {me}) or root: "
                    "that user could replace the store and its profiles",
                    f"{chown} {_user_name(me)} {step.path} (as root), or choose a PGO_PROFILE_STORE "
                    "whose parent directories are all yours or root's",
                )
            if step.link_to is None and mode & 0o022 and not mode & stat.S_ISVTX:
                who = {0o020: "its group", 0o002: "others"}.get(mode & 0o022, "its group and others")
                group = (
                    "; a group-writable directory is refused even when the group is your own: who else holds "
                    "the group (NSS, gshadow, setgid programs, running processes) cannot be known from here"
                    if mode & 0o022 == 0o020
                    else ""
                )
                raise StoreError(
                    f"{subject} is inside {step.shown}, which {who} may write "
                    f"(mode {mode:04o}, no sticky bit), owned by {owner}: another user could replace the store "
                    "and its profiles",
                    f"chmod go-w {step.path} (or chmod +t {step.path}), or choose a PGO_PROFILE_STORE "
                    f"whose parent directories only you can write{group}",
                )

    def _check_creatable(self) -> None:
        """The store does not exist yet: its nearest existing parent must let us create it."""
        parent = next(parent for parent in self.root.parents if parent.exists())  # ``/`` at the latest
        if not os.access(parent, os.W_OK | os.X_OK):
            raise StoreError(
                f"cannot create profile store {self.root}: {parent} is not writable", "choose another PGO_PROFILE_STORE"
            )

    def _check_root(self, when: str = "") -> None:
        try:
            info = os.lstat(self.root)
        except FileNotFoundError as exc:
            raise StoreError(
                f"profile store {self.root} is gone" + (f" {when}" if when else ""),
                "was it moved or removed meanwhile? run the stage again",
            ) from exc
        if stat.S_ISLNK(info.st_mode):
            raise StoreError(f"profile store {self.root} is a symlink", "point PGO_PROFILE_STORE at a real directory")
        if not stat.S_ISDIR(info.st_mode):
            raise StoreError(f"profile store {self.root} is not a directory", "remove it or choose another path")
        if info.st_uid != os.getuid():
            raise StoreError(
                f"profile store {self.root} is owned by uid {info.st_uid}, not by you (uid {os.getuid()})",
                "another user could swap the profile: choose a directory of your own",
            )
        if info.st_mode & 0o077:
            raise StoreError(
                f"profile store {self.root} has mode {stat.S_IMODE(info.st_mode):04o}, others may write or read it",
                f"chmod 700 {self.root}",
            )

    def path_for(self, sha256: str, suffix: str = SUFFIX) -> Path:
        return self.root / f"{sha256}{suffix}"

    def put(self, profile: Path, suffix: str = SUFFIX, *, digest: str | None = None) -> Path:
        """Copy ``profile`` into the store under its hash (and ``suffix``, one of :data:`SUFFIXES`); returns the
        store path, whose file is checked against its name (the copy, or the file already there). ``digest``: the
        profile's sha256 when the caller has just computed it for a check of its own (the copy is checked
        against it all the same)."""
        if suffix not in SUFFIXES:  # the callers pass the module's own constants: anything else is a programming error
            raise ValueError(f"ProfileStore.put: suffix {suffix!r} is not one of {', '.join(SUFFIXES)}")
        self.ensure()
        digest = digest or sha256_file(profile)
        target = self.path_for(digest, suffix)
        try:
            with self._lock():
                if target.is_symlink() or target.exists():
                    # Already there: it must be exactly this profile, or someone changed it.
                    self.verify(target, "before the build")
                    return target
                fd, tmp_name = tempfile.mkstemp(dir=self.root, prefix=f".{digest[:12]}.", suffix=".tmp")
                tmp = Path(tmp_name)
                try:
                    with os.fdopen(fd, "wb") as out, profile.open("rb") as src:
                        shutil.copyfileobj(src, out, 1 << 20)
                        out.flush()
                        os.fsync(out.fileno())
                    os.chmod(tmp, 0o600)
                    if sha256_file(tmp) != digest:
                        raise StoreError(f"{profile} changed while it was copied into the store", "run merge again")
                    os.replace(tmp, target)
                finally:
                    tmp.unlink(missing_ok=True)
        except Timeout as exc:
            raise StoreError(
                f"profile store {self.root} stayed locked for {LOCK_TIMEOUT:.0f} s",
                f"is another pipeline stuck? see {exc.lock_file}",
            ) from exc
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise StoreError(
                f"no space left to write the profile {profile} ({profile.stat().st_size} bytes) into the "
                f"profile store {self.root} ({exc.strerror}; {_free_bytes(self.root)} bytes free there)",
                "free space or choose another PGO_PROFILE_STORE",
            ) from exc
        return target

    def _lock(self) -> FileLock:
        """The store's lock, a file of its own (made when missing); anything else there is refused: filelock would
        fail to open a directory (a traceback before) and would flock a fifo or a link's target."""
        lock = self.root / LOCK_NAME
        try:
            info = os.lstat(lock)
        except FileNotFoundError:
            info = None
        if info is not None and not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "a symlink" if stat.S_ISLNK(info.st_mode) else None
            raise StoreError(
                f"the profile store's lock {lock} is {kind or 'not a file (a fifo, socket or device)'}",
                f"remove it (rm -r {lock}): a stage that writes the store makes it again",
            )
        return FileLock(str(lock), timeout=LOCK_TIMEOUT, mode=0o600)

    def verify(self, path: Path, when: str) -> str:
        """Check the way to the store again (who could have swapped it meanwhile), then re-hash a store file
        against its name; a mismatch is a :class:`StoreError`. ``when`` says when, in the message."""
        suffix = next((s for s in SUFFIXES if path.name.endswith(s)), None)
        if path.parent != self.root or suffix is None:
            raise StoreError(f"{path} is not a file of the profile store {self.root}", "let optimise put it there")
        self._check_parents(when)
        self._check_root(when)
        expected = path.name[: -len(suffix)]
        if path.is_symlink() or not path.is_file():
            raise StoreError(f"store file {path} is missing or a symlink {when}", "run merge (or optimise) again")
        actual = sha256_file(path)
        if actual != expected:
            raise StoreError(
                f"store file {path} is not the profile its name says {when} (its sha256 is {actual})",
                "something rewrote it: remove it and run optimise again",
            )
        return actual
