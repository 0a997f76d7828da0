"""The work dir is the pipeline's: one crate per work dir, one session at a time, nothing followed out of it.

Every session that writes the work dir (``PGO_OUT``) runs inside ``with claim(work, session) as held:``, which

- refuses a folder that holds files the pipeline did not write (a non-empty folder with neither ``report.json``
  nor the marker ``.pgo-workdir``), naming a few of them; a work dir of the older layout (with a report) is adopted;
- refuses a symbolic link inside the work dir, naming it: nothing is ever written through one;
- makes and marks the folder, then takes the work-dir lock (``.pgo-lock``, ``fcntl.flock``) for the session's
  whole run, or refuses at once naming the holder's pid and session.

``held.identify(identity)`` then records the crate's identity in report.json when the work dir is first used
(``"crate"``, beside the stages' records: readers that do not know it leave it be) and refuses a work dir of
another crate, naming both.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import stat
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from recipes import report
from recipes.config import Config
from recipes.errors import CheckFailed, MissingInput, WorkDirError
from recipes.inputs import not_a_file
from recipes.results import OptimiseResult
from recipes.runner import say
from recipes.store import sha256_file
from recipes.toolchain.cargo.invocation import cargo_env
from recipes.toolchain.cargo.metadata import CrateInfo, crate_info
from recipes.toolchain.rustc import rustc_info
from recipes.workdir import WorkDir

#: the folders a workload's programs run in (their content is the workload's: a run empties them without following
#: links), by their path in a work dir, and cargo's target dirs (anywhere): what the link check does not look inside
_NOT_SCANNED_SUFFIX = "-target"
_SCRATCH = frozenset(
    {("train",), ("verify",), ("bolt-train",), ("bolt-verify",), ("bench", "runs"), ("bench", "setup")}
)
#: the target of an identity that takes the recorded one (:func:`identity_of_config`)
ANY_TARGET = ""
#: how many of a foreign folder's files its refusal names
_NAMED = 3


@dataclass(frozen=True)
class CrateIdentity:
    """What a work dir's records are of: the crate's manifest, package, binary, target and features."""

    manifest: str
    package: str
    bin: str
    target: str
    features: tuple[str, ...]

    @classmethod
    def of(cls, crate: CrateInfo, target: str, features: Sequence[str]) -> CrateIdentity:
        return cls(str(crate.manifest), crate.package, crate.bin, target, tuple(sorted(features)))

    def as_json(self) -> dict[str, object]:
        return {**asdict(self), "features": list(self.features)}

    @classmethod
    def from_json(cls, value: Mapping[str, object]) -> CrateIdentity | None:
        """The recorded identity, or None when the record is not one (hand-edited: then it is written again)."""
        features = value.get("features")
        texts = [value.get(key) for key in ("manifest", "package", "bin", "target")]
        if not isinstance(features, list) or not all(isinstance(t, str) for t in [*texts, *features]):
            return None
        manifest, package, bin_name, target = (str(t) for t in texts)
        return cls(manifest, package, bin_name, target, tuple(str(f) for f in features))

    def describe(self) -> str:
        features = ",".join(self.features) or "none"
        return f"{self.package} (bin {self.bin}, {self.manifest}, target {self.target}, features {features})"


def identity_of_config(config: Config, environ: Mapping[str, str], *, any_target: bool = False) -> CrateIdentity:
    """The crate identity of a session that makes no plan (cargo metadata; the target: PGO_TARGET or the host).
    ``any_target``: a session that builds nothing (cpu-baseline reads the binary's architecture itself) takes the
    recorded target when PGO_TARGET is not given (its target is then ``""``: any)."""
    env = cargo_env(environ)
    crate = crate_info(config.manifest, config.package, config.bin, env)
    if config.target is None and any_target:
        return CrateIdentity.of(crate, ANY_TARGET, config.features)
    return CrateIdentity.of(crate, config.target or rustc_info(env).host, config.features)


def check_own_optimised(workdir: WorkDir, optimised: OptimiseResult) -> Path:
    """The optimised binary report.json names, refused unless it is the work dir's checked copy."""
    binary = optimised.binary
    own = workdir.checked("optimise", binary.name)
    if binary != own:
        raise CheckFailed(
            f"report.json names {binary} as the optimised binary, not {own} that optimise checked",
            "only the work dir's own checked binary is run: run `nox -s optimise` (or `nox -s pgo`) again",
        )
    return binary


def own_optimised_binary(workdir: WorkDir, optimised: OptimiseResult) -> Path:
    """The optimised binary report.json names, when it is the work dir's checked copy (``optimised/<bin>``) and
    still what optimise checked (its sha256); report.json may be hand-edited: anything else is not run."""
    binary = check_own_optimised(workdir, optimised)
    if not binary.is_file():
        raise MissingInput(f"the optimised binary {binary} is gone", "run `nox -s optimise` (or `nox -s pgo`) again")
    if sha256_file(binary) != optimised.binary_sha256:
        raise CheckFailed(
            f"the optimised binary {binary} changed since optimise checked it (its sha256 is not the recorded one)",
            "run `nox -s optimise` (or `nox -s pgo`) again",
        )
    return binary


@dataclass(frozen=True)
class Held:
    """A work dir claimed by a session: its lock held until the ``with`` ends."""

    workdir: WorkDir
    session: str

    def identify(self, identity: CrateIdentity) -> None:
        check_identity(self.workdir, identity)


def check_identity(workdir: WorkDir, identity: CrateIdentity) -> None:
    """Record ``identity`` on the work dir's first use (or in a report without one); refuse another crate's."""
    recorded_json = report.crate_identity(workdir.root)
    recorded = CrateIdentity.from_json(recorded_json) if recorded_json is not None else None
    if recorded is None:
        if identity.target != ANY_TARGET:  # recorded by a session that knows its target
            report.record_crate_identity(workdir.root, identity.as_json())
        return
    if identity.target == ANY_TARGET:
        identity = replace(identity, target=recorded.target)
    if recorded != identity:
        raise WorkDirError(
            f"the work dir {workdir.root} holds the records of {recorded.describe()}, not of {identity.describe()}",
            "give this crate its own PGO_OUT, or remove that work dir to start it over",
        )


def check_ours(workdir: WorkDir) -> None:
    """Refuse a ``PGO_OUT`` that is not a folder, or a non-empty one the pipeline did not make."""
    root = workdir.root
    if root.is_symlink() and not root.exists():
        raise WorkDirError(
            f"PGO_OUT={root} is a dangling symbolic link (to {root.readlink()})",
            "remove the link, or give PGO_OUT a folder",
        )
    if not root.exists():
        return
    if not root.is_dir():
        raise WorkDirError(f"PGO_OUT={root} is not a directory", "give PGO_OUT a new or empty folder")
    if workdir.report.exists() or workdir.marker.exists() or workdir.report.is_symlink():
        return
    # the children folder is the process records' (procs.recording_children), which a session may make first
    names = sorted(p.name for p in root.iterdir() if p != workdir.children)
    if names:
        shown = ", ".join(names[:_NAMED]) + (f" and {len(names) - _NAMED} more" if len(names) > _NAMED else "")
        raise WorkDirError(
            f"PGO_OUT={root} holds files the pipeline did not write ({shown}), and the stages empty folders of it",
            "give PGO_OUT a new or empty folder",
        )


#: what makes a folder a project's (its sources, its nox sessions, its repository): never a work dir
_PROJECT_FILES = ("Cargo.toml", "pyproject.toml", "noxfile.py", ".git")


def check_not_a_project(workdir: WorkDir) -> None:
    """Refuse a ``PGO_OUT`` that is a project's folder (the crate's, this project's root: a Cargo.toml, a
    pyproject.toml, a noxfile.py, a .git), before the other checks: they met its ``.nox`` or ``target`` first and
    blamed a symbolic link in it. A work dir the pipeline made already is let be."""
    root = workdir.root
    if not root.is_dir() or workdir.report.exists() or workdir.marker.exists():
        return
    held = [name for name in _PROJECT_FILES if os.path.lexists(root / name)]
    if held:
        raise WorkDirError(
            f"PGO_OUT={root} is a project's folder (it holds {', '.join(held)}): the work dir may not be the project "
            "root, and every stage empties folders of it",
            "give PGO_OUT a folder of its own, such as a new folder beside the project",
        )


def find_link(root: Path) -> Path | None:
    """A symbolic link anywhere in the work dir, at any depth (the first in name order), or None: a log or a control
    program three folders down is written through a link as surely as one at the top. Not looked inside: cargo's
    target dirs and the folders a workload's programs run in (:data:`_SCRATCH`, of the work dir and of each work dir
    inside it: a release of several targets holds theirs)."""
    return _link_in(root, root) if root.is_dir() else None


def _link_in(folder: Path, work: Path) -> Path | None:
    """The first symbolic link under ``folder``, which is in the work dir ``work``, or the first fifo, socket or
    device (a log opened for writing there waited forever for a reader before: the session hung)."""
    for entry in sorted(folder.iterdir()):
        if entry.is_symlink() or _special(entry):
            return entry
        if not entry.is_dir() or entry.name.endswith(_NOT_SCANNED_SUFFIX):
            continue
        if entry.relative_to(work).parts in _SCRATCH:
            continue
        inner = WorkDir(entry)  # a work dir inside this one (a release's target): its own scratch folders
        found = _link_in(entry, entry if inner.marker.exists() or inner.report.exists() else work)
        if found is not None:
            return found
    return None


def _special(entry: Path) -> bool:
    """Whether ``entry`` is a fifo, a socket or a device: nothing the pipeline writes."""
    try:
        mode = entry.lstat().st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode)


def check_links(workdir: WorkDir) -> None:
    """Refuse a symbolic link inside the work dir, naming it and where it points, and a fifo, socket or device."""
    link = find_link(workdir.root)
    if link is not None and _special(link):
        raise WorkDirError(
            f"{link} is a fifo, socket or device, and the pipeline writes only files and folders in the work dir",
            "remove it (the pipeline makes its files itself), or give PGO_OUT another folder",
        )
    if link is not None:
        raise WorkDirError(
            f"{link} is a symbolic link (to {link.readlink()}), and the pipeline never writes through one",
            "remove the link (the pipeline makes its folders itself), or give PGO_OUT another folder",
        )


def check_folders(workdir: WorkDir) -> None:
    """Refuse a file (or a fifo, a socket) where the pipeline keeps a folder of the work dir: before, the session
    met it as the OSError of its first mkdir there, a traceback (train's ``train``, optimise's ``bin``, ...)."""
    if not workdir.root.is_dir():
        return
    if os.path.lexists(workdir.report) and (what := not_a_file(workdir.report)) is not None:
        raise WorkDirError(
            f"{workdir.report} is {what}, and the pipeline keeps its report there, a file",
            "remove it (the pipeline writes the report itself), or give PGO_OUT another folder",
        )
    for path in workdir.folders():
        with suppress(FileNotFoundError):
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                raise WorkDirError(
                    f"{path} is not a folder, and the pipeline keeps one there",
                    "remove it (the pipeline makes its folders itself), or give PGO_OUT another folder",
                )


def _mark(workdir: WorkDir) -> None:
    """Make the work dir and its marker (a report of the older layout is adopted: it gets one too)."""
    try:
        workdir.root.mkdir(parents=True, exist_ok=True)
        if not workdir.marker.exists():
            fd = os.open(workdir.marker, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            os.close(fd)
    except OSError as exc:
        raise WorkDirError(
            f"cannot make the work dir {workdir.root}: {exc.strerror}", "give PGO_OUT a folder you can write"
        ) from exc


def _holder(workdir: WorkDir) -> str:
    """Who holds the lock, as its file says (read a few times: the holder writes it just after taking it)."""
    for _ in range(20):
        with suppress(OSError, ValueError):
            data = json.loads(workdir.lock.read_text(encoding="utf-8"))
            pid = int(data["pid"])
            os.kill(pid, 0)
            return f"pid {pid} (nox -s {data['session']}, since {data['since']})"
        time.sleep(0.05)
    return "another session"


def _lock(workdir: WorkDir, session: str) -> int:
    """The work-dir lock, taken without waiting: its descriptor (closed by the child processes' exec)."""
    try:
        fd = os.open(workdir.lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise WorkDirError(
            f"cannot open the work-dir lock {workdir.lock}: {exc.strerror}", "give PGO_OUT a folder you can write"
        ) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise WorkDirError(
            f"the work dir {workdir.root} is in use by {_holder(workdir)}",
            "one session at a time in a work dir: wait for it to finish, or give this one another PGO_OUT",
        ) from None
    holder = {"pid": os.getpid(), "session": session, "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    with suppress(OSError):  # best effort: a full disk must not stop the session that holds the lock
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
    return fd


#: a temporary name of :func:`recipes.files.atomic_output` (``.<name>.<pid>.tmp<suffix>``), and its writer's pid
_TEMPORARY = re.compile(r"^\..+\.(\d+)\.tmp[^/]*$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process, or no pid at all: not ours to judge
    return True


def dead_temporaries(folder: Path, work: Path) -> list[Path]:
    """The files under ``folder`` (of the work dir ``work``; not in cargo's target dirs nor a workload's scratch)
    named as a temporary of a whole-file write whose writer is no longer running: a session killed mid-write (a
    merge's ``.<bin>.profdata.<pid>.tmp`` after SIGKILL), which nothing else removes."""
    found: list[Path] = []
    for entry in sorted(folder.iterdir()):
        if entry.is_symlink():
            continue
        if entry.is_dir():
            scanned = not entry.name.endswith(_NOT_SCANNED_SUFFIX) and entry.relative_to(work).parts not in _SCRATCH
            found += dead_temporaries(entry, work) if scanned else []
        elif (match := _TEMPORARY.match(entry.name)) and entry.is_file() and not _alive(int(match.group(1))):
            found.append(entry)
    return found


def remove_dead_temporaries(workdir: WorkDir) -> None:
    """Remove the temporaries of killed runs (:func:`dead_temporaries`) from the work dir, saying so; called under
    the work dir's lock, so no session of this work dir is writing."""
    dead = dead_temporaries(workdir.root, workdir.root)
    for path in dead:
        with suppress(FileNotFoundError):
            path.unlink()
    if dead:
        shown = ", ".join(str(p.relative_to(workdir.root)) for p in dead[:_NAMED])
        more = f" and {len(dead) - _NAMED} more" if len(dead) > _NAMED else ""
        say(f"work dir: removed what a killed run left half-written: {shown}{more}")


def prepare(workdir: WorkDir) -> None:
    """Refuse a link inside the work dir and a folder the pipeline did not make, then make and mark it as the
    pipeline's: before a session writes anything there (its lock, or the plan's install log of cargo-zigbuild)."""
    check_not_a_project(workdir)
    check_links(workdir)
    check_ours(workdir)
    check_folders(workdir)
    _mark(workdir)


@contextmanager
def claim(work: Path, session: str) -> Iterator[Held]:
    """Hold the work dir ``work`` for ``session`` (``nox -s <session>``) until the block ends; see the module."""
    workdir = WorkDir(work)
    prepare(workdir)
    fd = _lock(workdir, session)
    try:
        check_links(workdir)  # again, under the lock: another session may have been making the folder
        remove_dead_temporaries(workdir)
        yield Held(workdir, session)
    finally:
        os.close(fd)


@contextmanager
def claim_each(works: Sequence[Path], session: str) -> Iterator[list[Held]]:
    """:func:`claim` of several work dirs (a release's targets), all held until the block ends."""
    with ExitStack() as stack:
        yield [stack.enter_context(claim(work, session)) for work in works]
