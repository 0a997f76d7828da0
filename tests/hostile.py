"""Hostile inputs for the readers' fuzz tests: garbage bytes around a real file, and a real document changed at
every key (the key deleted, its value replaced by one of every other type)."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from typing import Any

#: one value of each JSON and TOML type
VALUES: tuple[object, ...] = (None, True, 7, -1, 2.5, "", "x", [], [1, "a"], {}, {"k": 1})


def garbage(real: bytes, rng: random.Random, rounds: int) -> Iterator[bytes]:
    """Random bytes, bytes that are not UTF-8, every kind of truncation of ``real``, ``real`` with a byte changed."""
    yield b""
    yield b"\xff\xfe" + real
    yield real.replace(b"e", b"\xe9", 1)  # Latin-1, as an editor may save it
    yield real + b"\x80"
    for _ in range(rounds):
        yield rng.randbytes(rng.randrange(1, 300))
        yield real[: rng.randrange(len(real))]
        changed = bytearray(real)
        changed[rng.randrange(len(changed))] = rng.randrange(256)
        yield bytes(changed)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every value in ``doc`` (dict keys, and of a list its first item, as the others are alike)."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc[:1]) if isinstance(doc, list) else ()
    for key, value in items:
        yield (*prefix, key)
        yield from _paths(value, (*prefix, key))


def _same_type(a: object, b: object) -> bool:
    return type(a) is type(b) or (
        isinstance(a, int | float) and isinstance(b, int | float) and bool not in (type(a), type(b))
    )


def mutations(doc: Any, values: tuple[object, ...] = VALUES) -> Iterator[tuple[str, Any]]:
    """``(what, doc changed)``: each key deleted, each value replaced by ``values`` of every other type. The
    change is made in ``doc`` itself and undone after the next step: use (or serialise) it before then."""
    for path in list(_paths(doc)):
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        last = path[-1]
        original = parent[last]
        where = ".".join(map(str, path))
        try:
            if isinstance(parent, dict):
                del parent[last]
                yield f"{where} deleted", doc
                parent[last] = original
            for value in values:
                if not _same_type(value, original):
                    parent[last] = copy.deepcopy(value)
                    yield f"{where} = {value!r}", doc
        finally:
            parent[last] = original


def to_toml(doc: dict[str, Any]) -> str:
    """``doc`` as TOML: each top-level key an inline value (``None`` has no TOML form: left out)."""
    return "".join(f"{json.dumps(key)} = {_inline(value)}\n" for key, value in doc.items() if value is not None)


def _inline(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_inline(v) for v in value if v is not None) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_inline(v)}" for k, v in value.items() if v is not None) + "}"
    raise TypeError(value)
