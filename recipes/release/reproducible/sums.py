"""SHA256SUMS: the checksum file of a release, written and read back with every line checked."""

from __future__ import annotations

import re
from collections.abc import Mapping

from recipes.errors import CheckFailed

#: the checksum file of a release, beside its files
SUMS = "SHA256SUMS"


def sha256sums_text(sums: Mapping[str, str]) -> str:
    """``sha256sum`` format, one line per file, sorted by name (``sha256sum -c`` reads it)."""
    return "".join(f"{digest}  {name}\n" for name, digest in sorted(sums.items()))


_SUM_LINE = re.compile(r"^(?P<digest>[0-9a-f]{64}) [ *](?P<name>\S.*)$")


def sum_name_problem(name: str) -> str | None:
    """What makes ``name`` not a plain file name of a release's folder (a path, ``..``, a hidden file), or None."""
    parts = name.split("/")
    if name.startswith("/"):
        return "an absolute path"
    if ".." in parts:
        return "a path with '..'"
    if len(parts) > 1:
        return "a path into a folder, not a file name"
    if name.startswith("."):
        return "a hidden file"
    return None


def parse_sha256sums(text: str) -> dict[str, str]:
    """``{file name: sha256}`` of a SHA256SUMS file; a malformed line, a name that is not a plain file name of the
    release's folder, or a name listed twice is a :class:`CheckFailed`."""
    sums: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        match = _SUM_LINE.match(line)
        if not match:
            raise CheckFailed(f"SHA256SUMS line {number} is not '<sha256>  <file>': {line[:80]!r}", "re-download it")
        name = match.group("name")
        problem = sum_name_problem(name)
        if problem:
            raise CheckFailed(
                f"SHA256SUMS line {number} names {name!r}, {problem}: a release lists only the files of its folder",
                "download SHA256SUMS again from the release",
            )
        if name in sums:
            raise CheckFailed(f"SHA256SUMS line {number} lists {name} a second time", "re-download it")
        sums[name] = match.group("digest")
    return sums
