"""The one reader of a document's typed values: every refusal is one line naming the file, the table and the key.

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
import functools
import math
import re
import types
from collections.abc import Iterable
from typing import Any, ClassVar, TypeVar, Union, get_args, get_origin, get_type_hints

from recipes.errors import ConfigError, PgoError

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
