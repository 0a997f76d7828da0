"""What a base image's layers may hold: every member inside the image's root, read before a layer goes into an image.

A base's layers are copied into the image by digest; their tar members are read here (an uncompressed, gzip, bzip2 or
xz tar; zstd is not read by this Python, and refused) when ``nox -s image`` makes the image and when ``nox -s verify``
reads the base back from the layout. The rule (docs/releases.md, "What a base's layers may hold"):

- a member's name is relative (no leading ``/``) and has no ``..`` part;
- a hard link links to such a name;
- a symbolic link's relative target does not climb above the root from the link's folder, and an absolute target
  (read inside the image by a container runtime) is not the root nor a system folder (:data:`SYSTEM_FOLDERS`): a file
  under one (``/etc/localtime -> /usr/share/zoneinfo/UTC``, ``/var/run -> /run``) is one of the image's;
- no member is written through a symbolic link of its own layer or of one below it (``etc -> /etc``, then
  ``etc/passwd``).

Each would let a layer unpacked on a host (``tar -x``, a runtime with a bug) write outside its folder.
"""

from __future__ import annotations

import io
import posixpath
import tarfile
from collections.abc import Iterable

#: the folders a symbolic link's absolute target may not be: the root and the system's own
SYSTEM_FOLDERS = frozenset(
    (
        "/",
        *("/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/root", "/sbin"),
        *("/sys", "/usr", "/usr/bin", "/usr/lib", "/usr/lib64", "/usr/local", "/usr/sbin", "/var"),
    )
)
#: the prefix of an OCI whiteout file (``.wh.<name>`` deletes ``<name>`` of the layers below)
WHITEOUT = ".wh."


def member_name(name: str) -> str:
    """A member's name as a path in the image: without a leading ``./`` or a trailing ``/``."""
    while name.startswith("./"):
        name = name[2:]
    return name.rstrip("/") if name not in ("/", "") else name


def name_problem(name: str) -> str | None:
    """Why ``name`` (a member's, or a hard link's target) is not a path inside the image, or None."""
    if name.startswith("/"):
        return "is absolute"
    if ".." in name.split("/"):
        return "has a .. part"
    return "is empty" if not name or name == "." else None


def link_problem(name: str, target: str) -> str | None:
    """Why the symbolic link ``name`` to ``target`` leaves the image's root or names a system folder, or None."""
    if target.startswith("/"):
        resolved = posixpath.normpath("/" + target.lstrip("/"))  # POSIX keeps a leading //, a system does not
        return f"points to the system folder {resolved}" if resolved in SYSTEM_FOLDERS else None
    parts = name.split("/")[:-1]
    for part in target.split("/"):
        if part == "..":
            if not parts:
                return f"points to {target!r}, above the image's root"
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return None


def _through(name: str, links: set[str]) -> str | None:
    """The symbolic link among ``links`` that ``name``'s folders pass through, or None."""
    parts = name.split("/")
    return next((link for i in range(1, len(parts)) if (link := "/".join(parts[:i])) in links), None)


def members_problem(members: Iterable[tarfile.TarInfo], links: set[str]) -> str | None:
    """The first member of a layer that breaks the rule (the module's docstring), in words, or None. ``links`` holds
    the symbolic links of the layers below, and this layer's are added (a later layer is read with them)."""
    for member in members:
        name = member_name(member.name)
        kind = "symbolic link" if member.issym() else "hard link" if member.islnk() else "member"
        problem = name_problem(name)
        if problem is not None:
            return f"the {kind} {member.name!r} {problem}"
        through = _through(name, links)
        if through is not None:
            return f"the {kind} {member.name!r} is written through the symbolic link {through!r}"
        if member.islnk() and (problem := name_problem(member_name(member.linkname))) is not None:
            return f"the hard link {member.name!r} links to {member.linkname!r}, which {problem}"
        if member.issym() and (problem := link_problem(name, member.linkname)) is not None:
            return f"the symbolic link {member.name!r} {problem}"
        folder, _, base = name.rpartition("/")
        gone = f"{folder}/{base.removeprefix(WHITEOUT)}".lstrip("/") if base.startswith(WHITEOUT) else name
        links -= {link for link in links if link == gone or link.startswith(f"{gone}/")}
        if member.issym():
            links.add(name)
    return None


def layer_problem(data: bytes, links: set[str]) -> str | None:
    """:func:`members_problem` of the layer ``data`` (a tar, or one compressed by gzip, bzip2 or xz), or what makes
    it no tar this reads."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            return members_problem(tar, links)
    except (tarfile.TarError, EOFError, OSError) as exc:
        return f"is not a tar this reads (gzip, bzip2, xz or none; {exc})"
