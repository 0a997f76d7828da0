"""A tiny validator for TOML tables: every error names the file, the table and the key."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable
from typing import Any

from recipes.errors import ConfigError

#: instance, phase and scenario names: they name .profraw and log files
NAME = re.compile(r"[A-Za-z0-9_-]+")


#: the largest exit status a program can have (its low 8 bits are all a wait status keeps)
MAX_EXIT_CODE = 255


class Table:
    """Typed access to one TOML table; :meth:`done` refuses the keys nobody asked for."""

    def __init__(self, where: str, data: Any) -> None:
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected a table, got {type(data).__name__}", "see profiles/README.md")
        self.where = where
        self.data: dict[str, Any] = data
        self.seen: set[str] = set()

    def error(self, key: str, problem: str, hint: str = "see profiles/README.md") -> ConfigError:
        return ConfigError(f"{self.where}: {key}: {problem}", hint)

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

    def _get(self, key: str, types: tuple[type, ...], type_name: str, default: Any, *, required: bool) -> Any:
        self.seen.add(key)
        if key not in self.data:
            if required:
                raise self.error(key, "missing", f"add {key} = …")
            return default
        value = self.data[key]
        if isinstance(value, bool) and bool not in types:
            raise self.error(key, f"expected {type_name}, got a boolean")
        if not isinstance(value, types):
            raise self.error(key, f"expected {type_name}, got {type(value).__name__} {value!r}")
        return value

    def string(
        self, key: str, default: str | None = None, *, required: bool = False, choices: Iterable[str] | None = None
    ) -> Any:
        value = self._get(key, (str,), "a string", default, required=required)
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
        value = self._get(key, (int,), "an integer", default, required=required)
        if value is not None and minimum is not None and value < minimum:
            raise self.error(key, f"must be at least {minimum}, got {value}")
        return value

    def exit_code(self, key: str, default: int = 0) -> int:
        """An exit status a program can have: 0 to 255 (a wait status keeps 8 bits of it)."""
        value: int = self._get(key, (int,), "an integer", default, required=False)
        if not 0 <= value <= MAX_EXIT_CODE:
            raise self.error(key, f"{value} is not an exit code: a program exits with 0 to {MAX_EXIT_CODE}")
        return value

    def number(self, key: str, default: float | None = None, *, required: bool = False, finite: bool = True) -> Any:
        """A positive number; ``finite=False`` leaves inf and nan to the caller's own message."""
        value = self._get(key, (int, float), "a number", default, required=required)
        if finite and value is not None and not math.isfinite(value):
            raise self.error(key, f"must be a finite number, got {value}")
        if value is not None and value <= 0:
            raise self.error(key, f"must be positive, got {value}")
        return None if value is None else float(value)

    def boolean(self, key: str, *, default: bool | None = None) -> Any:
        return self._get(key, (bool,), "true or false", default, required=False)

    def strings(self, key: str, default: list[str] | None = None, *, required: bool = False) -> list[str]:
        value = self._get(key, (list,), "a list of strings", default if default is not None else [], required=required)
        if not all(isinstance(v, str) for v in value):
            raise self.error(key, "expected a list of strings")
        return list(value)

    def mapping(self, key: str) -> dict[str, str]:
        value = self._get(key, (dict,), "a table of strings", {}, required=False)
        if not all(isinstance(v, str) for v in value.values()):
            raise self.error(key, "expected a table of string values")
        return dict(value)

    def tables(self, key: str, *, required: bool = False) -> list[Table]:
        value = self._get(key, (list,), "an array of tables ([[…]])", [], required=False)
        if required and not value:
            raise self.error(key, f"needs at least one [[{key}]] table", "see profiles/README.md")
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


def fill(text: str, values: dict[str, str]) -> str:
    return text.format_map(values)
