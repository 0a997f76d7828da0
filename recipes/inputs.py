"""The one reader of the files the sessions read: bad bytes are one line naming the file, never a traceback.

Every file a session reads (workloads, ``pyproject.toml``, ``report.json``, a release's manifest, statements and
``SHA256SUMS``, ``.fdata``) goes through :func:`read_bytes`, :func:`read_text` (then :func:`parse_toml`) or
:func:`read_json`. A file that cannot be read, is not UTF-8, or is not valid TOML or JSON is the error class the
caller names (a :class:`~recipes.errors.PgoError`), with a line that says which file, what is wrong and where.
:class:`recipes.schema.Fields` then reads a JSON object's keys with their types, so a missing key or a value of
another type is one line too.
"""

from __future__ import annotations

import errno
import json
import math
import tomllib
from pathlib import Path
from typing import Any

from recipes.errors import PgoError

#: the largest file read whole (a workload, a report or a manifest is kilobytes; a .fdata tens of megabytes)
MAX_BYTES = 1 << 30


def read_bytes(path: Path, what: str, error: type[PgoError], hint: str, *, limit: int = MAX_BYTES) -> bytes:
    """The bytes of ``path``, ``what`` it is (``"the workload"``) naming it in the refusal."""
    try:
        size = path.stat().st_size
        if size > limit:
            raise error(f"{what} {path} is {size} bytes, more than the {limit} this reads", hint)
        return path.read_bytes()
    except OSError as exc:
        problem = {
            errno.ENOENT: "does not exist (or is a dangling symlink)",
            errno.EISDIR: "is a directory, not a file",
            errno.EACCES: "cannot be read (permission denied)",
        }.get(exc.errno or 0, f"cannot be read: {exc.strerror}")
        raise error(f"{what} {path} {problem}", hint) from exc


def decode(data: bytes, path: Path, what: str, error: type[PgoError], hint: str) -> str:
    """``data`` (the bytes of ``path``) as UTF-8 text."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise error(
            f"{what} {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}, offset {exc.start})",
            hint,
        ) from exc


def read_text(path: Path, what: str, error: type[PgoError], hint: str) -> str:
    """The UTF-8 text of ``path``."""
    return decode(read_bytes(path, what, error, hint), path, what, error, hint)


#: TOML's integers are 64-bit signed (its specification: a parser must refuse one it cannot hold); Python's reads any
TOML_INTEGERS = range(-(2**63), 2**63)


def _unreadable_at(data: dict[str, Any]) -> tuple[str, str] | None:
    """Where the first string or key with a NUL character, or integer beyond TOML's 64 bits, is in ``data``
    (``instance[1].phase[2].args[3]``) and what it is, or None; iterative, as a document may be as deep as the
    parser allows."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str) and "\0" in value:
            return where or "a value", "nul"
        if isinstance(value, int) and not isinstance(value, bool) and value not in TOML_INTEGERS:
            return where, f"an integer of {len(str(abs(value)))} digits"
        if isinstance(value, dict):
            for key, item in value.items():
                name = f"{where}.{key}" if where else key
                if "\0" in key:
                    return f"the key {name!r}", "nul"
                stack.append((name, item))
        elif isinstance(value, list):
            stack.extend((f"{where}[{index + 1}]", item) for index, item in enumerate(value))
    return None


def parse_toml(text: str, name: str, error: type[PgoError], hint: str, *, invalid: str = ":") -> dict[str, Any]:
    """The TOML document ``text`` of the file ``name``: not TOML, nested deeper than the parser can go (Python's
    recursion limit), holding a NUL character in a string or a key (no argument, path or variable can hold
    one: it would fail only when a program is started), or an integer TOML cannot hold is one line, the error class
    given."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{name}{invalid} not valid TOML: {exc}", hint) from exc
    except RecursionError as exc:
        raise error(
            f"{name}{invalid} nested too deeply to read (arrays or inline tables inside each other past Python's "
            "recursion limit)",
            "flatten it: no setting needs more than a few levels",
        ) from exc
    found = _unreadable_at(data)
    if found is not None and found[1] == "nul":
        raise error(
            f"{name}: {found[0]} holds a NUL character (\\0), which no argument, path or variable can hold",
            "remove it, or the \\u0000 escape that writes it",
        )
    if found is not None:  # Python would carry it on, to a traceback wherever it meets a float
        raise error(
            f"{name}: {found[0]} is {found[1]}, beyond TOML's 64-bit integers",
            f"write a number from {TOML_INTEGERS.start} to {TOML_INTEGERS.stop - 1}",
        )
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400: Python's float would read it as infinity
        raise ValueError(f"the number {text if len(text) <= 24 else text[:20] + '…'} is beyond a 64-bit float")
    return value


def read_json(path: Path, what: str, error: type[PgoError], hint: str) -> Any:
    """The JSON document of ``path`` (NaN and Infinity, and a number beyond a float that Python would read as
    infinity, are refused)."""
    text = read_text(path, what, error, hint)
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except (ValueError, RecursionError) as exc:  # json.JSONDecodeError is a ValueError
        raise error(f"{what} {path} is not valid JSON: {exc}", hint) from exc
