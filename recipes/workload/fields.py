"""Keys the phase kinds and the bench scenarios read alike: an HTTP ``path`` or ``paths``, an ``expect``, the
ceiling of a command's ``runs``."""

from __future__ import annotations

from collections.abc import Iterator

from recipes.schema import Table
from recipes.web import h2load

#: the most runs a phase (or a command scenario) may ask for (times PGO_TRAIN_SCALE, it is still a count, never a
#: duration)
MAX_RUNS = 2**31 - 1


def parse_expect(table: Table) -> str:
    expect: str = table.string("expect", "ok")
    if not h2load.valid_expect(expect):
        raise table.error("expect", f"{expect!r} is not ok, any, a class like 4xx or a code like 403")
    return expect


def iter_paths(table: Table) -> Iterator[str]:
    path = table.string("path")
    paths = table.strings("paths")
    if path is not None and paths:
        raise table.error("paths", "give path or paths, not both")
    for item in [path] if path is not None else paths:
        if not item.startswith("/"):
            raise table.error("path", f"{item!r} must start with /")
        yield item
