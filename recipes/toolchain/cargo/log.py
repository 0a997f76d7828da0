"""What cargo's ``-v``/``-vv`` log says: the commands it ran (rustc, rustdoc, build scripts, tests), the
package's own rustc lines, the artefacts of its JSON messages, LLVM's warnings about the profile.

The log is parsed as whole commands: a ``Running `…` `` span ends at cargo's closing backtick, not at the end
of a line, so a quoted value that holds newlines or backticks (``-vv`` prints ``CARGO_PKG_DESCRIPTION=…`` before
the compiler) is one word of one command.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recipes.toolchain.cargo.metadata import CrateInfo
from recipes.toolchain.rustflags import codegen_value


@dataclass(frozen=True)
class Invocation:
    """One ``Running `…` `` command of a cargo log, read as a whole: it may cover several lines."""

    env: tuple[tuple[str, str], ...]  # the ``NAME=value`` words before the program (``-vv``)
    argv: tuple[str, ...]  # the program and its arguments, unquoted
    first_line: int  # 0-based index of the log line it starts on
    last_line: int  # of the line its closing backtick is on


_RUNNING_START = re.compile(r"^[ \t]*Running `", re.MULTILINE)
_ENV_WORD = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$", re.DOTALL)
_BLANKS = re.compile(r"[ \t\r\n]+")
# One piece of a shell word: single-quoted (cargo's quoting), double-quoted, a backslash escape, or plain text.
_PIECE = re.compile(
    r"""'(?P<single>[^']*)'|"(?P<double>(?:[^"\\]|\\.)*)"|\\(?P<escaped>.)|(?P<plain>[^\s'"\\`]+)""", re.DOTALL
)
_DOUBLE_ESCAPE = re.compile(r"""\\([\\"$`\n])""")


def _words_until_backtick(text: str, pos: int) -> tuple[list[str], int] | None:
    """The shell words from ``pos`` to the first unquoted backtick, and the index after it.

    ``None`` when there is no such backtick, or a newline that is not quoted comes first: cargo quotes every
    word that holds one, so that is a truncated or foreign line, not a command.
    """
    words: list[str] = []
    word: list[str] | None = None
    while pos < len(text):
        char = text[pos]
        if char == "`":
            if word is not None:
                words.append("".join(word))
            return words, pos + 1
        if blanks := _BLANKS.match(text, pos):
            if "\n" in blanks.group(0):
                return None
            if word is not None:
                words.append("".join(word))
                word = None
            pos = blanks.end()
            continue
        piece = _PIECE.match(text, pos)
        if piece is None:  # an unbalanced quote
            return None
        if word is None:
            word = []
        kind = piece.lastgroup or "plain"  # the one of the four groups that matched
        value = piece.group(kind)
        word.append(_DOUBLE_ESCAPE.sub(r"\1", value) if kind == "double" else value)
        pos = piece.end()
    return None


def running_invocations(log_text: str) -> list[Invocation]:
    """Every ``Running `…` `` command of a cargo log (``-v`` or ``-vv``): rustc, rustdoc, build scripts, tests."""
    return list(_parse_invocations(log_text))


@functools.lru_cache(maxsize=4)
def _parse_invocations(log_text: str) -> tuple[Invocation, ...]:
    """(The stages ask several questions of one log: it is parsed once.)"""
    found: list[Invocation] = []
    pos = 0
    counted, line = 0, 0  # line: the number of newlines before index counted
    while match := _RUNNING_START.search(log_text, pos):
        parsed = _words_until_backtick(log_text, match.end())
        if parsed is None:
            pos = match.end()
            continue
        words, end = parsed
        env: list[tuple[str, str]] = []
        while words and (assignment := _ENV_WORD.match(words[0])):
            env.append((assignment.group("name"), assignment.group("value")))
            words.pop(0)
        line += log_text.count("\n", counted, match.start())
        counted = match.start()
        found.append(Invocation(tuple(env), tuple(words), line, line + log_text.count("\n", match.start(), end)))
        pos = end
    return tuple(found)


_COMPILERS = ("rustc", "rustdoc")


@dataclass(frozen=True)
class RustcCall:
    """One rustc (or rustdoc) command of a cargo log: its argv starts at the program (a wrapper, if any)."""

    crate_name: str
    crate_types: tuple[str, ...]
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()

    def codegen(self, option: str) -> str | None:
        """The value of ``-C <option>=…`` on this line (``-Cx=``, ``-C x=``, ``--codegen x=``, ``--codegen=x=``, and
        ``_`` for ``-`` in the option's name: rustc takes them all), the last one winning, as in rustc."""
        return codegen_value(self.argv, option)

    @property
    def metadata(self) -> str | None:
        return self.codegen("metadata")

    @property
    def target(self) -> str | None:
        """The value of ``--target`` (``--target x`` or ``--target=x``), the last one winning."""
        value = None
        for index, arg in enumerate(self.argv):
            if arg == "--target" and index + 1 < len(self.argv):
                value = self.argv[index + 1]
            elif arg.startswith("--target="):
                value = arg.split("=", 1)[1]
        return value

    @property
    def compiler(self) -> str:
        """``rustc`` or ``rustdoc`` (the first word named so, after any wrapper), else the program's name."""
        names = [Path(arg).name for arg in self.argv[:3]]
        return next((name for name in names if name in _COMPILERS), names[0] if names else "")

    @property
    def source(self) -> str | None:
        """The crate's root source file, as cargo gave it (relative to the workspace root, or absolute)."""
        return next(
            (arg for arg in self.argv[1:] if arg.endswith(".rs") and not arg.startswith("-") and "=" not in arg),
            None,
        )


def rustc_calls(log_text: str) -> list[RustcCall]:
    """Every rustc (and rustdoc) command in a cargo ``-v``/``-vv`` log, however many lines each covers."""
    return [
        RustcCall(argv[argv.index("--crate-name") + 1], crate_types(argv), argv, inv.env)
        for inv in running_invocations(log_text)
        if "--crate-name" in (argv := inv.argv)[:-1]
    ]


def crate_types(args: Sequence[str]) -> tuple[str, ...]:
    """The ``--crate-type`` values of a rustc command, those given apart first, then the ``--crate-type=`` ones."""
    types = tuple(args[i + 1] for i, a in enumerate(args[:-1]) if a == "--crate-type")
    return types + tuple(a.split("=", 1)[1] for a in args if a.startswith("--crate-type="))


def _same_file(a: Path, b: Path) -> bool:
    if os.path.normpath(a) == os.path.normpath(b):
        return True
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def is_own_crate(call: RustcCall, crate: CrateInfo) -> bool:
    """Whether ``call`` compiles the package's lib or bin: by crate name, and by source file when known.

    A dependency (another workspace member, a registry crate) may have a crate of the same name; its source
    file tells them apart. Build scripts (``build_script_build``) and proc-macros have other names or files.
    """
    if call.crate_name not in crate.crate_names:
        return False
    if not crate.sources or call.source is None:
        return True
    source = Path(call.source)
    if not source.is_absolute():
        if crate.workspace_root is None:
            return True
        source = crate.workspace_root / source
    return any(_same_file(source, own) for own in crate.sources)


def own_compiles(calls: Iterable[RustcCall], crate: CrateInfo, *, harnesses: bool = False) -> list[RustcCall]:
    """The compiles of the package's own lib and bin for the target (not its build script); with ``harnesses``,
    their test harnesses (``--test``) too."""
    own_types = {"bin", "lib", "rlib"}
    return [
        c
        for c in calls
        if c.target is not None
        and (own_types & set(c.crate_types) or (harnesses and "--test" in c.argv))
        and is_own_crate(c, crate)
    ]


def main_crate_calls(log_text: str, crate: CrateInfo) -> list[RustcCall]:
    """The rustc lines of the package's own lib and bin for the target (not its build script)."""
    return own_compiles(rustc_calls(log_text), crate)


def crate_identities(log_text: str, crate: CrateInfo) -> dict[str, str]:
    """``{"<crate name> (<type>)": <-C metadata>}`` of the package's own crates in a build log."""
    return {
        f"{call.crate_name} ({','.join(call.crate_types)})": call.metadata or "none"
        for call in main_crate_calls(log_text, crate)
    }


@dataclass(frozen=True)
class Artifact:
    """One ``compiler-artifact`` message of ``--message-format=json…``: a target cargo built (or found Fresh)."""

    package_id: str
    target_name: str
    kinds: tuple[str, ...]
    src_path: Path
    executable: Path | None
    test: bool  # a test harness (``cargo test``'s unit and integration test binaries)


def _json_messages(log_text: str, reason: str) -> list[dict[str, Any]]:
    """The JSON messages of one ``reason`` in a log that also holds text (stdout and stderr in one file)."""
    prefix = f'{{"reason":"{reason}"'
    messages = []
    for line in log_text.split("\n"):
        if not line.startswith(prefix):
            continue
        try:
            message = json.loads(line)
        except ValueError:
            continue  # a line cut short
        if isinstance(message, dict):
            messages.append(message)
    return messages


def compiler_artifacts(log_text: str) -> list[Artifact]:
    """Every ``compiler-artifact`` message of a log, in order."""
    artifacts = []
    for message in _json_messages(log_text, "compiler-artifact"):
        target = message.get("target", {})
        executable = message.get("executable")
        artifacts.append(
            Artifact(
                package_id=str(message.get("package_id", "")),
                target_name=str(target.get("name", "")),
                kinds=tuple(target.get("kind", ())),
                src_path=Path(target.get("src_path", "")),
                executable=Path(executable) if executable else None,
                test=bool(message.get("profile", {}).get("test", False)),
            )
        )
    return artifacts


def _own_artifact(artifact: Artifact, crate: CrateInfo) -> bool:
    if crate.sources:
        return any(_same_file(artifact.src_path, own) for own in crate.sources)
    return artifact.target_name.replace("-", "_") in crate.crate_names


def built_executable(log_text: str, crate: CrateInfo) -> Path | None:
    """Where cargo says it put the package's binary (``None`` without JSON messages or that artefact)."""
    found = [
        a.executable
        for a in compiler_artifacts(log_text)
        if a.executable is not None
        and not a.test
        and "bin" in a.kinds
        and a.target_name == crate.bin
        and _own_artifact(a, crate)
    ]
    return found[-1] if found else None


def harness_executables(log_text: str) -> list[tuple[str, Path]]:
    """``(target name, executable)`` of every test harness cargo built (``cargo test --message-format=json…``)."""
    return [(a.target_name, a.executable) for a in compiler_artifacts(log_text) if a.test and a.executable]


@dataclass(frozen=True)
class ProfileWarnings:
    """What the optimised build's LLVM said about the profile."""

    missing: int
    stale: int
    missing_by_crate: dict[str, int]
    stale_examples: tuple[str, ...]
    #: functions without profile data because a partial profile left out their records (never run, unchanged)
    never_run: int = 0


#: a CGU name has no ``@``: ``warning: <pkg>@<version>: …`` is a build script's (clang's, read by
#: recipes.toolchain.cflags)
_WARNING = re.compile(r"^warning: (?P<cgu>[^\s:@]+): (?P<text>.*)$")
MISSING_TEXT = "no profile data available for function"
STALE_TEXTS = (
    "function control flow change detected (hash mismatch)",
    "hash mismatch",
    "profile data may be out of date",
)


#: a JSON diagnostic of rustc's that cargo printed as it was: LLVM's debug output (``-pgo-view-raw-counts``) was
#: written to rustc's stderr from a codegen thread in the middle of the line, so cargo could not read it
_MIXED_DIAGNOSTIC = '{"$message_type":"diagnostic"'
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def unmixed(log_text: str) -> str:
    """The log with each JSON diagnostic that LLVM's debug output broke into (cargo prints such a line as it is,
    not rendered) put back on a line of its own as cargo renders it, so that its warning is read like the others."""
    if _MIXED_DIAGNOSTIC not in log_text:
        return log_text
    lines = []
    for line in log_text.split("\n"):
        start = line.find(_MIXED_DIAGNOSTIC)
        if start > 0:
            try:
                rendered = json.loads(line[start:]).get("rendered")
            except (ValueError, AttributeError):
                rendered = None
            if isinstance(rendered, str):
                lines.extend([line[:start], *_ANSI.sub("", rendered).rstrip("\n").split("\n")])
                continue
        lines.append(line)
    return "\n".join(lines)


def profile_warnings(log_text: str, dropped: Mapping[str, frozenset[int]] | None = None) -> ProfileWarnings:
    """Count ``-pgo-warn-missing-function`` and stale-profile warnings, per crate (from the CGU name).

    With ``dropped`` (the records a partial profile left out, name: CFG hashes), a missing function whose record
    was left out with its own hash is counted as never run, not missing; one whose left-out record has another
    hash is stale: the whole profile judges the build.

    Lines inside a ``Running `…` `` command (a multi-line value of ``-vv``) are not warnings. The warnings are
    read as cargo renders them (text, and ``--message-format=json-render-diagnostics``) or from its
    ``compiler-message`` JSON (``--message-format=json``, where no text of them is printed).
    """
    skip = {n for inv in running_invocations(log_text) for n in range(inv.first_line, inv.last_line + 1)}
    lines = [line for number, line in enumerate(log_text.split("\n")) if number not in skip]
    for message in _json_messages(log_text, "compiler-message"):
        diagnostic = message.get("message", {})
        if isinstance(diagnostic, dict) and diagnostic.get("level") == "warning":
            lines.append(f"warning: {diagnostic.get('message', '')}")
    found = list(filter(None, map(_WARNING.match, lines)))
    missing: list[str] = []
    edited: list[str] = []
    never_run = 0
    by_symbol = by_symbols(dropped or {})
    for m in (m for m in found if MISSING_TEXT in m.group("text")):
        match left_out(m.group("cgu"), m.group("text"), dropped or {}, by_symbol):
            case None:
                missing.append(m.group("cgu").split(".")[0])
            case True:
                never_run += 1
            case False:
                edited.append(f"{m.group('cgu')}: {_EDITED_TEXT} {missing_function_name(m.group('text'))}")
    stale = [
        m.group(0).strip()
        for m in found
        if MISSING_TEXT not in m.group("text") and any(s in m.group("text").lower() for s in STALE_TEXTS)
    ]
    stale = edited + stale
    return ProfileWarnings(len(missing), len(stale), dict(Counter(missing)), tuple(stale[:3]), never_run)


#: a function a partial profile left out whose CFG hash is not its record's in the whole profile
_EDITED_TEXT = "changed since the training (its never-run record in the whole profile has another CFG hash):"
_MISSING_FUNCTION = re.compile(rf"{MISSING_TEXT} (?P<name>\S+) Hash = (?P<hash>\d+)")


def missing_function_name(text: str) -> str:
    """The function a missing-profile warning's text names."""
    found = _MISSING_FUNCTION.search(text)
    return found.group("name") if found else text


def by_symbols(dropped: Mapping[str, frozenset[int]]) -> dict[str, frozenset[int]]:
    """The left-out records by their symbol alone: a local function's record is ``<cgu>;<symbol>``, and an edit
    elsewhere in the crate can move it to another CGU (cgu.2 to cgu.1) while its symbol stays."""
    symbols: dict[str, frozenset[int]] = {}
    for name, hashes in dropped.items():
        symbol = name.rsplit(";", 1)[-1]
        symbols[symbol] = symbols.get(symbol, frozenset()) | hashes
    return symbols


def left_out(
    cgu: str, text: str, dropped: Mapping[str, frozenset[int]], by_symbol: Mapping[str, frozenset[int]]
) -> bool | None:
    """Whether the function of a missing-profile warning (``text``, of the CGU ``cgu``) was left out of a partial
    profile as never run (True), or has a never-run record of its own name with another CFG hash, so was edited
    since (False); None: the whole profile has no never-run record of it. Its record's name is ``<cgu>;<symbol>``
    for a local function, else its symbol; a local function the optimised build put in another CGU than the
    instrumented one is found by its symbol (:func:`by_symbols`), and only with the same CFG hash: the same symbol
    is often a local copy in several CGUs, each with its own hash."""
    found = _MISSING_FUNCTION.search(text)
    if found is None:
        return None
    name, cfg_hash = found.group("name"), int(found.group("hash"))
    hashes = dropped.get(f"{cgu};{name}", dropped.get(name))
    if hashes is not None:
        return cfg_hash in hashes
    # a local copy in another CGU (the instrumented build's partitioning, or an edit, moved it): the same function
    # when its CFG hash is a left-out record's; else, as for a whole profile, a function without a record
    return True if cfg_hash in by_symbol.get(name, frozenset()) else None
