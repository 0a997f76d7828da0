"""Deterministic tarballs: written byte for byte the same anywhere, and read back with every member checked."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
import zlib
from collections.abc import Mapping
from pathlib import Path

from recipes.errors import CheckFailed, MissingInput


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tar_bytes(files: Mapping[str, tuple[bytes, int]], mtime: int, tar_format: int = tarfile.PAX_FORMAT) -> bytes:
    """An uncompressed tar of ``{name: (content, mode)}``: names sorted, owner 0 without names, mtime ``mtime``.

    The directories of the names get their own entries (mode 0755). Nothing of the machine (user, umask, time)
    gets in, so the same files give the same bytes anywhere (an image's layer is this,
    recipes/release/reproducible/oci.py).
    """
    dirs = {"/".join(parts[:i]) for parts in (name.split("/") for name in files) for i in range(1, len(parts))}
    entries: list[tuple[str, bytes | None, int]] = [(d, None, 0o755) for d in dirs]
    entries += [(n, content, mode) for n, (content, mode) in files.items()]
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tar_format) as tar:
        for name, content, mode in sorted(entries, key=lambda e: e[0]):
            info = tarfile.TarInfo(name)
            info.mtime = mtime
            info.mode = mode
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if content is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return raw.getvalue()


def tarball_bytes(files: Mapping[str, tuple[bytes, int]], mtime: int) -> bytes:
    """A .tar.gz of ``{name: (content, mode)}``: :func:`tar_bytes` in gzip of mtime 0 and no file name.

    Nothing of the machine (user, umask, time, file name) gets in, so the same files give the same bytes anywhere.
    """
    packed = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, compresslevel=9, mtime=0) as gz:
        gz.write(tar_bytes(files, mtime))
    return packed.getvalue()


def binary_tarball(bin_name: str, binary: bytes, top: str, mtime: int) -> bytes:
    """The release tarball of one binary: ``<top>/<bin>``, mode 0755."""
    return tarball_bytes({f"{top}/{bin_name}": (binary, 0o755)}, mtime)


def tar_member(tarball: Path, name: str) -> bytes:
    """One file of a .tar.gz, or a :class:`MissingInput`."""
    with tarfile.open(tarball, mode="r:gz") as tar:
        try:
            member = tar.getmember(name)
        except KeyError as exc:
            raise MissingInput(f"{tarball.name} has no {name}", "is it the release's tarball?") from exc
        stream = tar.extractfile(member)
        if stream is None:
            raise MissingInput(f"{name} in {tarball.name} is not a file", "is it the release's tarball?")
        return stream.read()


#: what the release writes in a tarball (:func:`binary_tarball`): one directory and the binary, both of this mode
TARBALL_MODE = 0o755
_LINKS_AND_DEVICES = {
    tarfile.SYMTYPE: "a symbolic link",
    tarfile.LNKTYPE: "a hard link",
    tarfile.CHRTYPE: "a character device",
    tarfile.BLKTYPE: "a block device",
    tarfile.FIFOTYPE: "a fifo",
}
_TARBALL_HINT = "it is not a tarball the release writes: download the release again"


def _member_problem(member: tarfile.TarInfo, top: str, expected: Mapping[str, bytes]) -> str | None:
    """What makes ``member`` other than one of the ``expected`` ``{name: tar type}`` (its name, its type), or None."""
    name = member.name
    parts = name.split("/")
    if name.startswith("/"):
        return f"holds {name!r}, an absolute path"
    if ".." in parts:
        return f"holds {name!r}, a path with '..'"
    if "" in parts or "." in parts:
        return f"holds {name!r}, not a plain path"
    if parts[0] != top:
        return f"holds {name!r}, outside its one directory {top}/"
    if member.type in _LINKS_AND_DEVICES:
        to = f" to {member.linkname!r}" if member.issym() or member.islnk() else ""
        return f"holds {name!r}, {_LINKS_AND_DEVICES[member.type]}{to}"
    if name not in expected:
        return f"holds {name!r}, which the release does not put in it (only {', '.join(sorted(expected))})"
    if member.type != expected[name]:
        return f"holds {name!r} as {'a directory' if member.isdir() else 'another kind of file'}, " + (
            "not a directory" if expected[name] == tarfile.DIRTYPE else "not a regular file"
        )
    return None


def _stamp_problem(member: tarfile.TarInfo, mtime: int) -> str | None:
    """How ``member`` is stamped otherwise than the release stamps it (owner, mode, mtime), or None."""
    if (member.uid, member.gid) != (0, 0) or (member.uname, member.gname) != ("", ""):
        return (
            f"has {member.name!r} owned by uid {member.uid} gid {member.gid} ({member.uname!r}:{member.gname!r}), "
            "not 0 0 without names"
        )
    if member.mode != TARBALL_MODE:
        return f"has {member.name!r} of mode {member.mode:o}, not {TARBALL_MODE:o}"
    if member.mtime != mtime:
        return f"has {member.name!r} of mtime {member.mtime}, not the manifest's source_date_epoch {mtime}"
    return None


def release_binary(tarball: Path, binary: str, mtime: int, *, limit: int = 1 << 30) -> bytes:
    """The binary ``<top>/<bin>`` of a release tarball, every member checked first: exactly the directory ``<top>``
    and that regular file, safe names, no link nor device, owner 0 without names, mode 0755 and mtime ``mtime``
    (the manifest's source_date_epoch), as :func:`binary_tarball` writes them. Anything else, or a file that is not
    a whole .tar.gz, is one :class:`CheckFailed` line naming the tarball and the member."""
    top = binary.split("/", maxsplit=1)[0]
    expected = {top: tarfile.DIRTYPE, binary: tarfile.REGTYPE}
    try:
        raw = _gunzip(tarball.read_bytes(), limit)
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
            members = tar.getmembers()
            seen: dict[str, tarfile.TarInfo] = {}
            for member in members:
                problem = _member_problem(member, top, expected)
                if problem is None and member.name in seen:
                    problem = f"holds {member.name!r} twice"
                if problem:
                    raise CheckFailed(f"{tarball.name} {problem}", _TARBALL_HINT)
                seen[member.name] = member
            for name in expected:
                if name not in seen:
                    raise CheckFailed(f"{tarball.name} has no {name}", _TARBALL_HINT)
            for member in members:
                problem = _stamp_problem(member, mtime)
                if problem:
                    raise CheckFailed(f"{tarball.name} {problem}, as the release writes it", _TARBALL_HINT)
            stream = tar.extractfile(seen[binary])
            if stream is None:  # not reached: a regular file, checked above
                raise CheckFailed(f"{binary} in {tarball.name} is not a file", _TARBALL_HINT)
            return stream.read()  # tarfile refuses a member cut short (unexpected end of data)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise CheckFailed(f"{tarball.name} is not a whole .tar.gz: {exc}", _TARBALL_HINT) from exc


def _gunzip(data: bytes, limit: int) -> bytes:
    """The one gzip stream of ``data``, whole (its CRC and length checked), at most ``limit`` bytes."""
    inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        raw = inflate.decompress(data, limit + 1)
    except zlib.error as exc:
        raise OSError(f"not gzip data ({exc})") from exc
    if len(raw) > limit:
        raise OSError(f"it unpacks to more than {limit} bytes")
    if not inflate.eof:
        raise EOFError("the gzip stream ends early (truncated)")
    if inflate.unused_data:
        raise OSError(f"data follows the gzip stream ({len(inflate.unused_data)} bytes)")
    return raw
