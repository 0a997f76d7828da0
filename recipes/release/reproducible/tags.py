"""Release tags (``vX.Y.Z``) and the one parser of the sessions' own options (:func:`take_options`, argparse)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from recipes.errors import ConfigError

_TAG = re.compile(r"^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z][0-9A-Za-z.-]*)?$")


def check_tag(text: str) -> str:
    """A release tag ``vX.Y.Z`` (an optional ``-rc.1`` suffix); anything else is a :class:`ConfigError`."""
    if not _TAG.fullmatch(text):  # match: $ also matches before a final newline ("v1.2.3\n")
        raise ConfigError(f"{text!r} is not a release tag", "give the tag first, as vX.Y.Z: nox -s release -- v1.2.3")
    return text


def split_tag(posargs: Sequence[str], session: str) -> tuple[str, list[str]]:
    """The positional tag the release sessions take first, and the options after it."""
    if not posargs or posargs[0].startswith("-"):
        raise ConfigError(f"nox -s {session} needs a release tag first", f"nox -s {session} -- v1.2.3 [--options]")
    return check_tag(posargs[0]), list(posargs[1:])


GATHER = "--gather"


@dataclass(frozen=True)
class Option:
    """One option of a session's posargs, as :func:`take_options` takes it: ``flag`` (``--target``); ``kind``:
    ``one`` (one value, the last given wins), ``all`` (repeatable, every value), ``folders`` (one or more values up
    to the next option, given once) or ``flag`` (no value); ``value``, what it needs in words, and ``hint``, the
    fix, for the refusal of an option without its value."""

    flag: str
    kind: Literal["one", "all", "folders", "flag"] = "one"
    value: str = "a value"
    hint: str | None = None

    def missing(self) -> ConfigError:
        """The refusal of this option without its value (none, an empty one, or the next option); of a flag, the
        refusal of a value given to it (``--rebuild=1``)."""
        if self.kind == "flag":
            return ConfigError(f"{self.flag} takes no value", f"write {self.flag} alone")
        if self.kind == "folders":
            hint = self.hint or f"write {self.flag} DIR [DIR ...]"
            return ConfigError(f"{self.flag} needs at least one folder", hint)
        return ConfigError(f"{self.flag} needs {self.value}", self.hint or f"write {self.flag} VALUE")


#: what each kind of option is to argparse
_ACTIONS: dict[str, dict[str, object]] = {
    "one": {"action": "store"},
    "all": {"action": "append"},
    "folders": {"action": "append", "nargs": "+"},
    "flag": {"action": "store_true"},
}


@dataclass(frozen=True)
class Taken:
    """The values :func:`take_options` took, by flag, and each read as its kind."""

    values: dict[str, str | list[str] | bool | None]

    def one(self, flag: str) -> str | None:
        value = self.values[flag]
        assert value is None or isinstance(value, str), f"{flag} is not an option of kind one"
        return value

    def all(self, flag: str) -> list[str]:
        value = self.values[flag]
        assert isinstance(value, list), f"{flag} is not an option of kind all"
        return value

    def folders(self, flag: str) -> list[str] | None:
        value = self.values[flag]
        assert value is None or isinstance(value, list), f"{flag} is not an option of kind folders"
        return value

    def flag(self, flag: str) -> bool:
        value = self.values[flag]
        assert isinstance(value, bool), f"{flag} is not an option of kind flag"
        return value


def take_options(posargs: Sequence[str], *options: Option) -> tuple[Taken, list[str]]:
    """The session's ``options`` taken out of ``posargs`` by one argparse parser (``--flag value`` or
    ``--flag=value``, no abbreviations), and the rest in their order (the configuration's options, for
    :func:`recipes.config.load_config`). The values by flag: ``one`` a str or None, ``all`` a list, ``folders`` a
    list or None, ``flag`` a bool. An option without its value, or ``folders`` given twice, is one
    :class:`ConfigError`."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    by_dest: dict[str, Option] = {}
    for option in options:
        dest = option.flag.lstrip("-").replace("-", "_")
        by_dest[dest] = option
        parser.add_argument(option.flag, dest=dest, **_ACTIONS[option.kind])  # type: ignore[arg-type]
    try:
        namespace, rest = parser.parse_known_args(list(posargs))
    except argparse.ArgumentError as error:
        option = next(option for option in options if option.flag == error.argument_name)
        raise option.missing() from None
    for item in rest:  # an abbreviation of an option of the session's is not taken as it, nor left to the config
        flag = item.split("=", 1)[0]
        whole = [option.flag for option in options if len(flag) > 2 and option.flag.startswith(flag)]
        if flag.startswith("--") and whole and flag not in whole:
            raise ConfigError(
                f"session arguments: {flag} is an abbreviation of {' or '.join(whole)}", f"write {whole[0]} whole"
            )
    values: dict[str, str | list[str] | bool | None] = {}
    for dest, option in by_dest.items():
        value = getattr(namespace, dest)
        if option.kind == "all":
            value = value or []
        if option.kind == "folders" and value is not None:
            if len(value) > 1:
                raise ConfigError(f"{option.flag} is given twice", f"name every folder after one {option.flag}")
            value = value[0]
        if option.kind in ("one", "all") and value is not None and "" in ([value] if option.kind == "one" else value):
            raise option.missing()
        values[option.flag] = value
    return Taken(values), rest


def take_option(posargs: Sequence[str], option: str) -> tuple[str | None, list[str]]:
    """Remove ``--option value`` (or ``--option=value``) from ``posargs``: its value and the rest."""
    taken, rest = take_options(posargs, Option(option, hint=f"write {option} DIR"))
    return taken.one(option), rest


def take_gather(posargs: Sequence[str]) -> tuple[list[str] | None, list[str]]:
    """``--gather DIR [DIR ...]`` (of ``nox -s release --`` and ``nox -s merge --``): the folders up to the next
    option (None without ``--gather``), and the rest."""
    taken, rest = take_options(posargs, Option(GATHER, "folders"))
    return taken.folders(GATHER), rest


def take_all(
    posargs: Sequence[str], option: str, value: str = "a value", hint: str | None = None
) -> tuple[list[str], list[str]]:
    """Every value of a repeatable ``--option value`` (or ``--option=value``) in ``posargs``, and the rest; an
    option without its value (none, an empty one, or the next option) is refused: ``<option> needs <value>``."""
    taken, rest = take_options(posargs, Option(option, "all", value, hint))
    return taken.all(option), rest
