"""The one reader of the files the sessions read: bad bytes are one line naming the file, never a traceback.

Every file a session reads (workloads, ``pyproject.toml``, ``report.json``, a release's manifest, statements and
``SHA256SUMS``, ``.fdata``) goes through :func:`read_bytes`, :func:`read_text` (then :func:`parse_toml`) or
:func:`read_json`. A file that cannot be read, is not UTF-8, or is not valid TOML or JSON is the error class the
caller names (a :class:`~recipes.errors.PgoError`), with a line that says which file, what is wrong and where.
:class:`Fields` then reads a JSON object's keys with their types, so a missing key or a value of
another type is one line too.

The one reader of a document's typed values: every refusal is one line naming the file, the table and the key.

:class:`Reader` holds the mechanism: a key looked up, a missing or null value, a boolean where a number was asked
for, a value of another type, a list holding something else, all checked in one place. The two kinds of document
read key by key speak in their own words through it:

- :class:`Table`, a TOML table of a workload (``w.toml [[instance]] 'cli': port: expected an integer, got str
  'x'``), which also refuses the keys nobody asked for (:meth:`Table.done`);
- :class:`Fields`, a JSON object of a release's manifest or a BOLT training record (``m.json: bolt: 'binary' is the
  number 3, not a string``).

report.json's records are read whole against their declared types by :func:`recipes.results.from_json`, which
names types and values with the same words (:data:`TYPE_NAMES`, :func:`kind`).
"""

from __future__ import annotations

import dataclasses
import difflib
import errno
import functools
import json
import math
import os
import re
import stat
import tomllib
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar, TypeVar, Union, get_args, get_origin, get_type_hints

from recipes.errors import ConfigError, PgoError

#: the largest file read whole (a workload, a report or a manifest is kilobytes; a .fdata tens of megabytes)
MAX_BYTES = 1 << 30


def read_bytes(path: Path, what: str, error: type[PgoError], hint: str, *, limit: int = MAX_BYTES) -> bytes:
    """The bytes of ``path``, ``what`` it is (``"the workload"``) naming it in the refusal."""
    try:
        # O_NONBLOCK: a fifo is opened at once (and refused below), not waited on for a writer
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as stream:
            found = os.fstat(stream.fileno())
            if stat.S_ISDIR(found.st_mode):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
            if not stat.S_ISREG(found.st_mode):
                raise error(f"{what} {path} is {file_kind(path, found.st_mode)}, not a file", hint)
            if found.st_size > limit:
                raise error(f"{what} {path} is {found.st_size} bytes, more than the {limit} this reads", hint)
            return stream.read()
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


#: the longest file name and path Linux takes (NAME_MAX; PATH_MAX less its NUL): every call on a longer one fails
#: with ENAMETOOLONG, so a path given so is refused where it is given, not where it is first used
NAME_MAX = 255
PATH_MAX = 4095


def user_path(text: str, base: Path, what: str, error: type[PgoError] = ConfigError) -> Path:
    """The path ``text`` a user gave (``what`` says where: ``PGO_MANIFEST``), ``~`` expanded, relative to ``base``. A
    ``~user`` of no user here, a file name longer than NAME_MAX bytes or a path longer than PATH_MAX is one line."""
    shown = text if len(text) <= 80 else f"{text[:60]}…"
    try:
        path = Path(text).expanduser()
    except RuntimeError:  # Python's words: "Could not determine home directory."
        user = text.split("/", 1)[0]
        raise error(
            f"{what}: {shown!r} starts with {user}, and there is no home directory of {user[1:] or 'yours'} here",
            "write the path without ~",
        ) from None
    path = path if path.is_absolute() else base / path
    longest = max(path.parts, key=lambda part: len(os.fsencode(part)))
    if len(os.fsencode(longest)) > NAME_MAX:
        raise error(
            f"{what}: {shown!r} holds a name of {len(os.fsencode(longest))} bytes, and a file name is at most "
            f"{NAME_MAX}",
            "give a path whose every name is shorter",
        )
    if len(os.fsencode(path)) > PATH_MAX:
        raise error(
            f"{what}: {shown!r} is a path of {len(os.fsencode(path))} bytes, and a path is at most {PATH_MAX}",
            "give a shorter path",
        )
    return path


def home_expanded(path: Path) -> Path:
    """``path`` with ``~`` expanded; a ``~user`` of no user here is left as written (Path.expanduser raises
    RuntimeError), to be refused as a path that does not exist."""
    try:
        return path.expanduser()
    except RuntimeError:
        return path


def is_file(path: Path) -> bool:
    """Whether ``path`` is a file; a name no file can have (ENAMETOOLONG, which Path.is_file raises) is not one."""
    try:
        return path.is_file()
    except OSError:
        return False


def is_dir(path: Path) -> bool:
    """Whether ``path`` is a directory; a name no file can have (ENAMETOOLONG) is not one."""
    try:
        return path.is_dir()
    except OSError:
        return False


def not_a_file(path: Path) -> str | None:
    """What ``path`` is when it is not a regular file (followed through a symbolic link), in words: ``no such file``,
    ``a directory``, ``a character device`` (/dev/null), ``a fifo``, ``a socket``, ``a block device``; None when it is
    a regular file."""
    try:
        mode = path.stat().st_mode
    except OSError:  # missing, a dangling link, a name no file can have
        return "no such file"
    kinds = (
        (stat.S_ISREG, None),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a fifo"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((words for test, words in kinds if test(mode)), "not a regular file")


class NotRegularFile(ValueError):
    """What a path is when it is not a regular file (``str``: "a fifo", "a symbolic link (to /etc)", ...)."""


def file_kind(path: Path, mode: int) -> str:
    """What ``mode`` (an lstat's) makes ``path``, in a refusal's words: "a fifo", "a symbolic link (to X)", ..."""
    if stat.S_ISLNK(mode):
        return f"a symbolic link (to {path.readlink()})"
    kinds = [(stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a fifo"), (stat.S_ISSOCK, "a socket")]
    kinds += [(stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")]
    return next((name for test, name in kinds if test(mode)), "a regular file" if stat.S_ISREG(mode) else "no file")


def regular_size(path: Path) -> int:
    """The size of ``path`` when it is a regular file itself (by lstat: a link is not followed); else
    :class:`NotRegularFile` naming what it is (an OSError as it is: a missing file)."""
    mode = path.lstat()
    if not stat.S_ISREG(mode.st_mode):
        raise NotRegularFile(file_kind(path, mode.st_mode))
    return mode.st_size


def read_regular(path: Path) -> bytes:
    """The bytes of ``path`` when it is a regular file, never following a link nor waiting on a fifo (opened with
    O_NOFOLLOW and O_NONBLOCK, then checked by fstat: a file swapped after a check is caught too); else
    :class:`NotRegularFile` (an OSError as it is)."""
    regular_size(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # made a link since the lstat
            raise NotRegularFile("a symbolic link") from exc
        raise
    with os.fdopen(fd, "rb") as stream:
        mode = os.fstat(stream.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(file_kind(path, mode))
        return stream.read()


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


#: instance, phase and scenario names: they name .profraw and log files
NAME = re.compile(r"[A-Za-z0-9_-]+")

#: the largest exit status a program can have (its low 8 bits are all a wait status keeps)
MAX_EXIT_CODE = 255

#: what a value of each scalar type is called in a refusal
TYPE_NAMES: dict[Any, str] = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    type(None): "null",
}

#: a key not in the document (a None of its own would be a JSON null); as a default, none: the key is required
_ABSENT: Any = object()

#: a dataclass field's metadata key: the field's key in its JSON file, when it is not the field's name
JSON_KEY = "json_key"
#: a dataclass field's metadata key: the field is never written (it says something of the file, not in it)
NOT_WRITTEN = "not_written"
#: a dataclass field's metadata key: the function ``(fields, key) -> value`` that reads the field when its type is
#: not all it must be (a sha256, a file name that follows from other keys); :meth:`Fields.record` calls it
READ = "read"

Record = TypeVar("Record")


def without_none(hint: Any) -> Any:
    """``X`` of ``X | None``; any other type as it is."""
    if get_origin(hint) in (Union, types.UnionType):
        inner = [option for option in get_args(hint) if option is not type(None)]
        if len(inner) == 1:
            return inner[0]
    return hint


@functools.cache
def _field_types(declared: type) -> dict[str, object]:
    """A dataclass's fields' types, evaluated once (the annotations are strings)."""
    return get_type_hints(declared)


def kind(value: Any) -> str:
    """What a JSON or TOML value is, for a message: ``a list``, ``the string 'x'``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {shown!r}"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


class Reader:
    """Typed access to one object of a document, ``where`` naming it. A dialect says how a refusal reads:
    :meth:`_refusal` (the key and the problem) and :meth:`_unfit` (a missing value, a value of another type)."""

    #: the words of a refusal of the whole object (a list where an object was expected)
    not_an_object: ClassVar[str]

    def __init__(self, data: Any, where: str, error: type[PgoError], hint: str) -> None:
        self.where = where
        self.refuse_as = error
        self.hint = hint
        if not isinstance(data, dict):
            raise error(self.not_an_object.format(where=where, kind=kind(data), type=type(data).__name__), hint)
        self.data: dict[str, Any] = data
        self.seen: set[str] = set()

    def _refusal(self, key: str, problem: str, hint: str | None = None) -> PgoError:
        raise NotImplementedError

    def _unfit(self, key: str, value: Any, name: str) -> PgoError:
        """The refusal of ``key`` whose ``value`` is not ``name`` (``a string``); :data:`_ABSENT`: it has none."""
        raise NotImplementedError

    def _value(self, key: str, types: tuple[type, ...], name: str, default: Any = _ABSENT) -> Any:
        """The value of ``key`` when it is one of ``types`` (a boolean only when ``bool`` is one), ``default`` when
        there is none and a default is given; a refusal otherwise."""
        self.seen.add(key)
        if key not in self.data and default is not _ABSENT:
            return default
        value = self.data.get(key, _ABSENT)
        if value is _ABSENT or (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            raise self._unfit(key, value, name)
        return value

    def _only(self, key: str, values: list[Any], item: type, problem: str) -> list[Any]:
        """``values`` when each is an ``item`` (a list of strings); the first that is not refused as ``problem``
        (``{kind}`` the value's :func:`kind`)."""
        odd = next((value for value in values if not isinstance(value, item)), _ABSENT)
        if odd is not _ABSENT:
            raise self._refusal(key, problem.format(kind=kind(odd)))
        return list(values)

    def has(self, key: str) -> bool:
        return key in self.data


class Table(Reader):
    """Typed access to one TOML table of a workload; :meth:`done` refuses the keys nobody asked for."""

    not_an_object = "{where}: expected a table, got {type}"

    def __init__(self, where: str, data: Any) -> None:
        super().__init__(data, where, ConfigError, "see profiles/README.md")

    def error(self, key: str, problem: str, hint: str | None = None) -> PgoError:
        """A refusal of ``key`` with this table's name: ``w.toml [[instance]] 'cli': port: …``."""
        return self.refuse_as(f"{self.where}: {key}: {problem}", self.hint if hint is None else hint)

    _refusal = error

    def _unfit(self, key: str, value: Any, name: str) -> PgoError:
        if value is _ABSENT:
            return self._refusal(key, "missing", f"add {key} = …")
        got = "a boolean" if isinstance(value, bool) else f"{type(value).__name__} {value!r}"
        return self._refusal(key, f"expected {name}, got {got}")

    def named(self, what: str) -> str:
        """The table's required ``name`` (letters, digits, - and _: it names files); from then on its errors
        name it: ``w.toml [[instance]] #2`` becomes ``w.toml [[instance]] 'cli'``."""
        name: str = self.string("name", required=True)
        if not NAME.fullmatch(name):
            raise self.error(
                "name", f"{name!r} must be letters, digits, - and _ (ASCII)", f"it names the {what}'s files"
            )
        self.where = f"{self.where.rsplit(' #', 1)[0]} {name!r}"
        return name

    def string(
        self, key: str, default: str | None = None, *, required: bool = False, choices: Iterable[str] | None = None
    ) -> Any:
        value = self._value(key, (str,), TYPE_NAMES[str], _ABSENT if required else default)
        if choices is not None and value is not None and value not in set(choices):
            known = sorted(choices)
            close = difflib.get_close_matches(value, known, n=1)
            raise self.error(
                key,
                f"unknown value {value!r}",
                f"did you mean {close[0]!r}?" if close else f"one of {', '.join(known)}",
            )
        return value

    def integer(
        self, key: str, default: int | None = None, *, required: bool = False, minimum: int | None = None
    ) -> Any:
        value = self._value(key, (int,), TYPE_NAMES[int], _ABSENT if required else default)
        if value is not None and minimum is not None and value < minimum:
            raise self.error(key, f"must be at least {minimum}, got {value}")
        return value

    def exit_code(self, key: str) -> int:
        """An exit status a program can have: 0 to 255 (a wait status keeps 8 bits of it); 0 when not given."""
        value: int = self._value(key, (int,), TYPE_NAMES[int], 0)
        if not 0 <= value <= MAX_EXIT_CODE:
            raise self.error(key, f"{value} is not an exit code: a program exits with 0 to {MAX_EXIT_CODE}")
        return value

    def number(self, key: str, default: float | None = None, *, finite: bool = True) -> Any:
        """A positive number; ``finite=False`` leaves inf and nan to the caller's own message."""
        value = self._value(key, (int, float), TYPE_NAMES[float], default)
        if finite and value is not None and not math.isfinite(value):
            raise self.error(key, f"must be a finite number, got {value}")
        if value is not None and value <= 0:
            raise self.error(key, f"must be positive, got {value}")
        return None if value is None else float(value)

    def boolean(self, key: str, *, default: bool | None = None) -> Any:
        return self._value(key, (bool,), TYPE_NAMES[bool], default)

    def strings(self, key: str, *, required: bool = False) -> list[str]:
        value = self._value(key, (list,), "a list of strings", _ABSENT if required else [])
        return self._only(key, value, str, "expected a list of strings")

    def mapping(self, key: str) -> dict[str, str]:
        value = self._value(key, (dict,), "a table of strings", {})
        if not all(isinstance(v, str) for v in value.values()):
            raise self.error(key, "expected a table of string values")
        return dict(value)

    def environment(self, key: str) -> dict[str, str]:
        """A table of environment variables: :meth:`mapping`, each name one a process can be given (not empty, no
        ``=``: the start of the program raised ValueError, a traceback, mid-training before)."""
        value = self.mapping(key)
        bad = next((name for name in value if not name or "=" in name), None)
        if bad is not None:
            raise self.error(key, f"{bad!r} is not a variable name (a name is not empty and has no =)")
        return value

    def tables(self, key: str, *, required: bool = False) -> list[Table]:
        value = self._value(key, (list,), "an array of tables ([[…]])", [])
        if required and not value:
            raise self.error(key, f"needs at least one [[{key}]] table")
        return [Table(f"{self.where} [[{key}]] #{i + 1}", item) for i, item in enumerate(value)]

    def table(self, key: str) -> Table | None:
        self.seen.add(key)
        if key not in self.data:
            return None
        return Table(f"{self.where} [{key}]", self.data[key])

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.seen)
        if unknown:
            close = difflib.get_close_matches(unknown[0], sorted(self.seen), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(sorted(self.seen))}"
            raise self.error(unknown[0], "unknown key", hint)


class Fields(Reader):
    """Typed access to one JSON object of a file: a missing key or a value of another type is one line.

    ``where`` names the object (``"report.json: optimise"``); nested objects are reached with :meth:`object`,
    whose errors name the whole path (``manifest.json: bolt: 'binary' is missing``). A null is a missing value:
    ``opt_string`` and an ``X | None`` field of :meth:`record` give None for it.
    """

    not_an_object = "{where} is {kind}, not an object"

    def _refusal(self, key: str, problem: str, hint: str | None = None) -> PgoError:
        return self.refuse_as(f"{self.where}: {key!r} {problem}", self.hint if hint is None else hint)

    def _unfit(self, key: str, value: Any, name: str) -> PgoError:
        if value is _ABSENT:
            return self._refusal(key, "is missing")
        return self._refusal(key, f"is {'a boolean' if isinstance(value, bool) else kind(value)}, not {name}")

    def string(self, key: str) -> str:
        return str(self._value(key, (str,), TYPE_NAMES[str]))

    def opt_string(self, key: str) -> str | None:
        return None if self.data.get(key) is None else self.string(key)

    def integer(self, key: str) -> int:
        return int(self._value(key, (int,), TYPE_NAMES[int]))

    def number(self, key: str) -> float:
        value = self._value(key, (int, float), TYPE_NAMES[float])
        if not math.isfinite(value):
            raise self._refusal(key, f"is {value}, not a finite number")
        return float(value)

    def boolean(self, key: str) -> bool:
        return bool(self._value(key, (bool,), TYPE_NAMES[bool]))

    def array(self, key: str) -> list[Any]:
        value: list[Any] = self._value(key, (list,), "a list")
        return value

    def strings(self, key: str) -> list[str]:
        return self._only(key, self.array(key), str, "holds {kind}, not only strings")

    def object(self, key: str) -> Fields:
        value = self._value(key, (dict,), "an object")
        return Fields(value, f"{self.where}: {key}", self.refuse_as, self.hint)

    def record(self, declared: type[Record]) -> Record:
        """The dataclass ``declared`` read from this object, its fields in their order: each under its
        :data:`JSON_KEY` or its name, read by its :data:`READ` function or as its type says (:meth:`typed`); a
        :data:`NOT_WRITTEN` field without one keeps its default. The reader of what :func:`recipes.results.json_of`
        writes."""
        values: dict[str, object] = {}
        types_of = _field_types(declared)  # type: ignore[arg-type]
        for spec in dataclasses.fields(declared):  # type: ignore[arg-type]
            key = spec.metadata.get(JSON_KEY, spec.name)
            read = spec.metadata.get(READ)
            if read is not None:
                values[spec.name] = read(self, key)
            elif not spec.metadata.get(NOT_WRITTEN):
                values[spec.name] = self.typed(key, types_of[spec.name])
        return declared(**values)

    def typed(self, key: str, hint: Any) -> Any:
        """The value of ``key`` as the type ``hint`` has it: a scalar, a tuple of strings or of records, a mapping
        of strings, a record (:meth:`record`); ``X | None`` is None for a missing key or a null."""
        inner = without_none(hint)
        if inner is not hint and self.data.get(key) is None:
            return None
        scalar = {str: self.string, int: self.integer, bool: self.boolean, float: self.number}.get(inner)
        if scalar is not None:
            return scalar(key)
        if isinstance(inner, type) and dataclasses.is_dataclass(inner):
            return self.object(key).record(inner)
        origin, args = get_origin(inner), get_args(inner)
        item_type: Any = args[0] if args else None
        if origin is tuple and item_type is str:
            return tuple(self.strings(key))
        if origin is tuple and isinstance(item_type, type) and dataclasses.is_dataclass(item_type):
            return tuple(
                Fields(item, f"{self.where}: {key}[{index}]", self.refuse_as, self.hint).record(item_type)
                for index, item in enumerate(self.array(key))
            )
        if origin is dict and args == (str, str):
            mapping = self.object(key)
            return {name: mapping.string(name) for name in mapping.data}
        raise TypeError(f"{self.where}: {key}: no reader of the type {hint}")  # a type no record declares


def fill(text: str, values: dict[str, str]) -> str:
    return text.format_map(values)
