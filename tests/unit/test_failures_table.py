"""docs/failures.md's table quotes the start of each refusal's line: every quoted message is still in recipes/.

Each backticked fragment of the middle column ("the line begins (or says)") is split where the page leaves a value
out (``…``, a ``<placeholder>``) and where the hint starts (`` (``, as ``PgoError.line`` joins them); each piece
must occur in a string that recipes/ makes: a literal, or an f-string whose constant parts it matches, a
formatted value standing for one word of the page (a path, a number, ``aarch64``) or for a whole literal of
recipes/ (a phrase chosen among several), with at least three letters of the piece from the f-string's own text.
Docstrings do not count. A line joined from two f-strings (``f"{what} and this machine is {host}"``, ``what``
made elsewhere) is quoted as two fragments, one for each. The prose of the other columns is not checked.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAILURES = ROOT / "docs" / "failures.md"
#: a ``|`` outside backticks
_CELL_SEPARATOR = re.compile(r"\|(?=(?:[^`]*`[^`]*`)*[^`]*$)")
#: where the page leaves a value out, or the hint begins
_GAP = re.compile(r"…|<[^>]+>| \(")

#: a string recipes/ makes: its constant parts, ``None`` for each formatted value
Template = tuple[str | None, ...]


def _docstrings(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


@cache
def _templates() -> tuple[Template, ...]:
    found: list[Template] = []
    for path in sorted((ROOT / "recipes").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstrings(tree)
        inside_fstrings = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                found.append(
                    tuple(
                        v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else None
                        for v in node.values
                    )
                )
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in skip
                and id(node) not in inside_fstrings
            ):
                found.append((node.value,))
    return tuple(found)


@cache
def _literals() -> frozenset[str]:
    """The whole literals, which a formatted value may stand for when the page shows it with its spaces."""
    return frozenset(t[0].strip() for t in _templates() if len(t) == 1 and t[0] is not None and len(t[0].strip()) >= 4)


#: the letters and digits of a piece (all, when it has fewer) that a string's own constant parts must give: a piece
#: of values alone (a path, a number, a phrase) is made by any f-string of values and spaces
COVERED = 3


def _letters(text: str) -> int:
    return sum(c.isalnum() for c in text)


def _matches(piece: str, template: Template) -> bool:
    """Whether ``piece`` is a run of some string ``template`` makes: its constant parts as they are, a formatted
    value as one word of the page or a whole literal of recipes/ (a phrase chosen among several); at least
    :data:`COVERED` letters from its constant parts. A piece that is a whole literal is made too."""
    n = len(piece)
    literals = _literals()
    if piece in literals:
        return True
    impossible = -1

    @cache
    def at(i: int, k: int, offset: int) -> int:
        """The most letters of ``piece[i:]`` covered when it goes on at ``template[k][offset:]``, or -1."""
        if i == n:
            return 0
        if k == len(template):
            return impossible
        part = template[k]
        if part is None:  # a formatted value
            best = impossible
            j = i
            while True:
                best = max(best, at(j, k + 1, 0))
                if j == n:
                    return max(best, 0)
                if piece[j].isspace():  # a value with spaces: a whole literal
                    for e in range(n, j, -1):
                        shown = piece[i:e].strip()
                        if shown in literals:
                            after = 0 if e == n else at(e, k + 1, 0)
                            if after >= 0:
                                best = max(best, after)
                    return best
                j += 1
        rest = part[offset:]
        common = 0
        while common < len(rest) and i + common < n and rest[common] == piece[i + common]:
            common += 1
        covered = _letters(piece[i : i + common])
        if i + common == n:
            return covered
        if common < len(rest):
            return impossible
        after = at(i + common, k + 1, 0)
        return impossible if after < 0 else covered + after

    best = impossible
    for k, part in enumerate(template):
        if part is None:
            best = max(best, at(0, k, 0))
        else:
            start = part.find(piece[0])
            while start >= 0:
                best = max(best, at(0, k, start))
                start = part.find(piece[0], start + 1)
    return best >= min(COVERED, _letters(piece))


def _quoted() -> Iterator[tuple[int, str, str]]:
    """(line, fragment, piece) of every piece of a quoted message in the table's middle column."""
    for number, line in enumerate(FAILURES.read_text(encoding="utf-8").splitlines(), 1):
        if not line.startswith("| ") or line.startswith(("| ---", "| when |")):
            continue
        cells = [c.strip() for c in _CELL_SEPARATOR.split(line.strip()[1:-1])]
        assert len(cells) == 3, f"docs/failures.md:{number}: a row of other than three cells"
        if cells[0].startswith("**"):  # a group heading
            continue
        for fragment in re.findall(r"`([^`]+)`", cells[1]):
            for piece in _GAP.split(fragment):
                piece = piece.strip(" '\",:;")  # the quotes and punctuation around a value
                if piece:
                    yield number, fragment, piece


def test_the_table_quotes_messages() -> None:
    assert len(list(_quoted())) > 150


#: a word of four letters or more, by which the templates likely to make a piece are tried first
_WORD = re.compile(r"[A-Za-z0-9_]{4,}")


@cache
def _by_word() -> dict[str, tuple[int, ...]]:
    """The templates (their indices) by each word of their constant parts."""
    index: dict[str, set[int]] = {}
    for number, template in enumerate(_templates()):
        for part in template:
            for word in _WORD.findall(part or ""):
                index.setdefault(word, set()).add(number)
    return {word: tuple(sorted(numbers)) for word, numbers in index.items()}


def _likely_first(piece: str) -> Iterator[Template]:
    """Every template, those that share a word with ``piece`` first: the same verdict as trying them in their order,
    found sooner (the whole table: 19 s -> under 2 s)."""
    templates, index = _templates(), _by_word()
    likely = sorted({n for word in _WORD.findall(piece) for n in index.get(word, ())})
    yield from (templates[n] for n in likely)
    tried = set(likely)
    yield from (t for n, t in enumerate(templates) if n not in tried)


def test_every_quoted_message_is_in_recipes() -> None:
    wrong = [
        f"docs/failures.md:{number}: {piece!r} (in `{fragment}`)"
        for number, fragment, piece in _quoted()
        if not any(_matches(piece, t) for t in _likely_first(piece))
    ]
    assert not wrong, "no string of recipes/ makes these:\n" + "\n".join(wrong)


@pytest.mark.parametrize(
    ("piece", "template", "found"),
    [
        ("is not a target this rustc knows", (None, " is not a target this rustc knows"), True),
        ("PGO_TARGET=aarch64 is not a", (None, "=", None, " is not a target this rustc knows"), True),
        ("is not a target that rustc knows", (None, " is not a target this rustc knows"), False),
        # a value with spaces stands only for a whole literal of recipes/
        ("which its group may write", (None, ", which ", None, " may write"), True),
        ("which anyone at all may write", (None, ", which ", None, " may write"), False),
        ("holds 'x', a symbolic link to", (None, " holds ", None, ", ", None, " to ", None), True),
        ("holds 'x', a symbolic lnk to", (None, " holds ", None, ", ", None, " to ", None), False),
    ],
)
def test_a_piece_is_matched_by_constant_parts_and_words(piece: str, template: Template, found: bool) -> None:
    assert _matches(piece, template) is found


@pytest.mark.parametrize(
    "reworded",
    [
        "RUSTFLAGS was set",
        "is not a target that rustc knows",
        "the training ran 5 of 9 functions, fewer than PGO_MIN_FUNCTIONS=",
        "which its group can write",
        "is an aarch64 binary and this machine is x86_64: CPU time under emulation tells nothing of the binary",
    ],
)
def test_a_message_worded_otherwise_is_found_nowhere(reworded: str) -> None:
    """What the check is for: a message reworded in recipes/ (here, on the page) no longer matches."""
    assert not any(_matches(reworded, t) for t in _templates())
