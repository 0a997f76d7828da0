"""Release tags (``vX.Y.Z``) and the release sessions' positional tag and options."""

from __future__ import annotations

import re
from collections.abc import Sequence

from recipes.errors import ConfigError

_TAG = re.compile(r"^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z][0-9A-Za-z.-]*)?$")


def check_tag(text: str) -> str:
    """A release tag ``vX.Y.Z`` (an optional ``-rc.1`` suffix); anything else is a :class:`ConfigError`."""
    if not _TAG.match(text):
        raise ConfigError(f"{text!r} is not a release tag", "give the tag first, as vX.Y.Z: nox -s release -- v1.2.3")
    return text


def split_tag(posargs: Sequence[str], session: str) -> tuple[str, list[str]]:
    """The positional tag the release sessions take first, and the options after it."""
    if not posargs or posargs[0].startswith("-"):
        raise ConfigError(f"nox -s {session} needs a release tag first", f"nox -s {session} -- v1.2.3 [--options]")
    return check_tag(posargs[0]), list(posargs[1:])


def take_option(posargs: Sequence[str], option: str) -> tuple[str | None, list[str]]:
    """Remove ``--option value`` (or ``--option=value``) from ``posargs``: its value and the rest."""
    rest: list[str] = []
    value: str | None = None
    items = list(posargs)
    index = 0
    while index < len(items):
        item = items[index]
        if item == option:
            if index + 1 >= len(items):
                raise ConfigError(f"{option} needs a value", f"write {option} DIR")
            value = items[index + 1]
            index += 2
            continue
        if item.startswith(option + "="):
            value = item.split("=", 1)[1]
        else:
            rest.append(item)
        index += 1
    return value, rest


GATHER = "--gather"


def take_gather(posargs: Sequence[str]) -> tuple[list[str] | None, list[str]]:
    """``--gather DIR [DIR ...]`` (of ``nox -s release --`` and ``nox -s merge --``): the folders up to the next
    option (None without ``--gather``), and the rest."""
    items = list(posargs)
    if GATHER not in items:
        return None, items
    start = items.index(GATHER)
    end = start + 1
    while end < len(items) and not items[end].startswith("-"):
        end += 1
    folders = items[start + 1 : end]
    rest = items[:start] + items[end:]
    if not folders:
        raise ConfigError(f"{GATHER} needs at least one folder", f"write {GATHER} DIR [DIR ...]")
    if GATHER in rest:
        raise ConfigError(f"{GATHER} is given twice", f"name every folder after one {GATHER}")
    return folders, rest


def take_all(
    posargs: Sequence[str], option: str, value: str = "a value", hint: str | None = None
) -> tuple[list[str], list[str]]:
    """Every value of a repeatable ``--option value`` (or ``--option=value``) in ``posargs``, and the rest; an
    option without its value (none, an empty one, or the next option) is refused: ``<option> needs <value>``."""
    values: list[str] = []
    rest: list[str] = []
    items = list(posargs)
    index = 0
    while index < len(items):
        item = items[index]
        if item == option or item == option + "=":
            if item == option + "=" or index + 1 >= len(items) or items[index + 1].startswith("-"):
                raise ConfigError(f"{option} needs {value}", hint or f"write {option} VALUE")
            values.append(items[index + 1])
            index += 2
            continue
        if item.startswith(option + "="):
            values.append(item.split("=", 1)[1])
        else:
            rest.append(item)
        index += 1
    return values, rest
