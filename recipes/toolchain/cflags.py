"""The C and C++ of build scripts (cc-rs) in the profile: the compiler, its flags, and what the builds did with them.

cc-rs passes none of rustc's profile flags to the C compiler (cc-rs issue 1986: the profiling runtime and the
profile formats are tied to one LLVM), and asks users whose compiler is of rustc's LLVM to give
``-fprofile-generate=`` / ``-fprofile-use=`` in ``CFLAGS`` / ``CXXFLAGS``. So the instrumented build gets
``CC_<triple>``/``CXX_<triple>`` (a clang of rustc's LLVM major) and ``CFLAGS_<triple>``/``CXXFLAGS_<triple>`` with
``-fprofile-generate=<the Rust code's profraw dir>``, the optimised one ``-fprofile-use=<the store path>``.

cc-rs reads ``CC_<triple>`` and ``CFLAGS_<triple>`` for every build script whose ``TARGET`` is that triple, and
when the target is the host, build-dependencies and proc-macros (built for the host) have that ``TARGET`` too. So
``CC_<triple>`` is a small script (:func:`wrapper_script`): under the target's own build directory
(``OUT_DIR`` in ``<target dir>/<triple>/release/build/``) it runs clang of rustc's major, elsewhere the compiler the
host build would have used (the user's, or ``cc``/``c++``) without the profile flags.

What happened is read from what the builds leave (:func:`c_crates`): each target build script's objects, their
compiler (the ``.comment`` section), whether they are instrumented (``__llvm_prf_cnts``), their functions; and
clang's own warnings (``-pgo-warn-missing-function``, hash mismatch) from the optimised build's log.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from recipes.errors import CheckFailed, CommandFailed, ConfigError, EnvironmentRefused, PgoError, ToolchainError
from recipes.files import atomic_output
from recipes.results import CCodeRecord, CCrateRecord, CLanguageRecord
from recipes.runner import capture, query
from recipes.toolchain.clang_route import clang_route
from recipes.toolchain.rustc import RustcInfo
from recipes.toolchain.rustflags import CargoConfigFile

#: the flags of clang's profile, which the pipeline adds itself and refuses in the user's flags
PROFILE_PREFIXES = (
    "-fprofile-generate",
    "-fprofile-use",
    "-fprofile-instr-generate",
    "-fprofile-instr-use",
    "-fcs-profile-generate",
    "-fprofile-sample-use",
    "-fauto-profile",
    "-fprofile-arcs",  # gcc's and clang's gcov instrumentation, as --coverage
    "-fprofile-instrument",  # clang -cc1's (-Xclang -fprofile-instrument=llvm, -fprofile-instrument-use-path=)
    "--coverage",
    "-coverage",
)
#: the compiler and flags variables of cc-rs: a profile flag in any of them (or in a response file they name)
COMPILER_VARS = ("CC", "CXX", "CFLAGS", "CXXFLAGS")
#: how deep response files may name response files (clang's own limit is the file count; a cycle is refused)
_RSP_DEPTH = 16
#: diagnostics of the optimised build's target C (no code change): each C function without profile data named
WARN_FLAGS = ("-mllvm", "-pgo-warn-missing-function")
#: where Debian's LLVM packages put clang (``/usr/lib/llvm-<major>/bin``)
LLVM_BIN = "/usr/lib/llvm-{major}/bin"
_CLANG_VERSION = re.compile(r"clang version (\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class Language:
    """C or C++: its compiler variable, its flags variable, the target's compiler and the host's."""

    name: str  # "C" or "C++"
    var: str  # "CC" or "CXX"
    flags_var: str  # "CFLAGS" or "CXXFLAGS"
    compiler: tuple[str, ...] | None  # the target's compiler when the profile reaches it, else None
    host: tuple[str, ...]  # what the build would use without the pipeline (the user's or cc-rs's default)
    version: str | None  # clang's version when profiled
    off: str | None  # why this language is not profiled
    #: the packages whose target C of this language gets clang and the profile (``PGO_C=a,b``); None: every one
    crates: tuple[str, ...] | None = None
    #: the setting that chose ``crates``, as given (``PGO_C=a,b``, ``PGO_CXX=a``), for the lines that name it
    chosen_by: str = ""

    def profiles(self, package: str) -> bool:
        """Whether this language's C of ``package``'s target build script gets clang and the profile."""
        return self.compiler is not None and (self.crates is None or package in self.crates)

    def left_by_choice(self, package: str) -> bool:
        """Whether this language's C of ``package`` is unprofiled by the user's choice (``PGO_CXX=0``, a list that
        leaves it out), not for a reason to warn of (a user's ``CC`` that is gcc, no clang++)."""
        if self.compiler is None:
            return self.off is not None and self.off.startswith(("PGO_C=", "PGO_CXX=")) and self.off.endswith("=0")
        return self.crates is not None and package not in self.crates


@dataclass(frozen=True)
class CPlan:
    """The profile of the C and C++ of build scripts: on or off, and with which compilers."""

    triple: str
    languages: tuple[Language, ...]
    setting: str  # how PGO_C decided: "auto", "on", "off"
    #: flags of every build's target C, profiled or not (a release's ``-ffile-prefix-map``: :func:`prefix_map_flags`)
    base_flags: tuple[str, ...] = ()
    #: the build's environment, which the compilers' version queries run with (its PATH finds them)
    env: Mapping[str, str] = field(kw_only=True, repr=False, compare=False)
    #: said before the build: the C of these packages' build scripts will stay unprofiled, and why (no clang of
    #: rustc's LLVM: :func:`missing_clang_line`); None when there is nothing to say
    before: str | None = field(default=None, kw_only=True, compare=False)

    @property
    def enabled(self) -> bool:
        return any(lang.compiler is not None for lang in self.languages)

    def profiles(self, package: str) -> bool:
        """Whether ``package``'s target C (of any language) gets clang and the profile."""
        return any(lang.profiles(package) for lang in self.languages)

    def left_out(self, package: str) -> list[str]:
        """Why ``package``'s C is not profiled though its language is: not among the packages a list names."""
        return [
            f"{lang.name}: not in {lang.chosen_by}"
            for lang in self.languages
            if lang.compiler is not None and lang.left_by_choice(package)
        ]

    def clang_line(self) -> str | None:
        """The first line of ``--version`` of the clang that compiles the profiled C (None: none is profiled)."""
        for lang in self.languages:
            if lang.compiler is not None:
                return capture([*lang.compiler, "--version"], env=self.env).splitlines()[0].strip()
        return None

    def record(self, crates: list[CCrateRecord]) -> CCodeRecord:
        """The ``c_code`` record of a build, with the crates that compiled C."""
        languages: dict[str, CLanguageRecord] = {}
        for lang in self.languages:
            languages[lang.name] = {
                "compiler": list(lang.compiler) if lang.compiler else None,
                "version": lang.version,
                "profiled": lang.compiler is not None,
                "off": lang.off,
            }
            if lang.crates is not None:
                languages[lang.name]["crates"] = list(lang.crates)
        return {"setting": self.setting, "crates": crates, "languages": languages}


def env_names(var: str, triple: str, *, cross: bool) -> list[str]:
    """The variables cc-rs reads for ``var`` of ``triple``, first wins (``CC_<t>``, ``CC_<t_u>``, ``TARGET_CC`` or
    ``HOST_CC``, ``CC``); flags variables are all joined, in the reverse order."""
    return [
        f"{var}_{triple}",
        f"{var}_{triple.replace('-', '_').replace('.', '_')}",
        f"{'TARGET' if cross else 'HOST'}_{var}",
        var,
    ]


def target_var(var: str, triple: str) -> str:
    """``CC_x86_64_unknown_linux_gnu``: the variable the pipeline sets."""
    return env_names(var, triple, cross=False)[1]


def clang_version(argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    """The clang version ``argv --version`` (run with ``env``) prints, None when it is not clang (gcc, or no such
    program)."""
    try:
        text = capture([*argv, "--version"], env=env)
    except CommandFailed:
        return None
    match = _CLANG_VERSION.search(text)
    return ".".join(g for g in match.groups() if g is not None) if match else None


def package(major: int) -> str:
    """What to install for clang of LLVM ``major`` (Debian's package)."""
    return f"apt-get install clang-{major}"


def find_clang_major(major: int, env: Mapping[str, str]) -> Path | None:
    """``clang-<major>`` on PATH, else ``/usr/lib/llvm-<major>/bin/clang``; None when neither is there."""
    named = shutil.which(f"clang-{major}", path=env.get("PATH", os.defpath))
    if named:
        return Path(named)
    default = Path(LLVM_BIN.format(major=major)) / "clang"
    return default if default.is_file() else None


def clang_major_of(line: str) -> int | None:
    """The major of a clang version line (``Debian clang version 22.1.8 (…)`` -> 22)."""
    match = _CLANG_VERSION.search(line)
    return int(match.group(1)) if match else None


def find_clang(rustc: RustcInfo, env: Mapping[str, str], explicit: str | None) -> Path | None:
    """The clang of rustc's LLVM major: ``PGO_CLANG`` when given (refused when missing), else ``clang-<major>`` on
    PATH or ``/usr/lib/llvm-<major>/bin/clang``; None when there is none."""
    if explicit:
        found = shutil.which(explicit, path=env.get("PATH", os.defpath))
        if not found:
            raise ToolchainError(
                f"PGO_CLANG={explicit}: no such program",
                f"give a clang of LLVM {rustc.llvm_major} (Debian: `{package(rustc.llvm_major)}`)",
            )
        return Path(found)
    return find_clang_major(rustc.llvm_major, env)


def check_major(path: str, version: str | None, rustc: RustcInfo, what: str) -> str:
    """The version of a clang that must be of rustc's LLVM major, or the one-line refusal."""
    if version is None:
        raise ToolchainError(
            f"{what} {path} is not clang: `{path} --version` prints no clang version",
            f"give a clang of LLVM {rustc.llvm_major} (Debian: `{package(rustc.llvm_major)}`), or PGO_C=0",
        )
    if int(version.split(".")[0]) != rustc.llvm_major:
        raise ToolchainError(
            f"{what} {path} is clang {version} but rustc {rustc.release} is LLVM {rustc.llvm_version}: its "
            "instrumented C would not match rustc's profiling runtime and profile format",
            f"use clang {rustc.llvm_major} (Debian: `{package(rustc.llvm_major)}`), or PGO_C=0 to leave the C "
            "unprofiled",
        )
    return version


def refuse_profile_flags(
    env: Mapping[str, str], triple: str, *, cross: bool, cwd: Path | None = None, where: str = ""
) -> None:
    """A profile flag already in the user's ``CC``/``CXX`` or ``CFLAGS``/``CXXFLAGS`` (any variable cc-rs reads for
    ``triple``, and any ``@file`` they name, read recursively) is refused; so is a response file that cannot be
    read. A relative ``@file`` is read from ``cwd`` (the crate's directory, where cargo runs its build script)."""
    base = cwd if cwd is not None else Path.cwd()
    for var in COMPILER_VARS:
        for name in env_names(var, triple, cross=cross):
            if found := profile_flags_in(env.get(name, "").split(), base, name):
                raise EnvironmentRefused(
                    f"{name}{where} already holds profile flags ({', '.join(found)})",
                    "remove them: the pipeline adds -fprofile-generate / -fprofile-use to the C of build scripts "
                    "itself (PGO_C=0 leaves the C alone)",
                )


def refuse_config_env_profile_flags(
    configs: Sequence[CargoConfigFile], triple: str, *, cross: bool, cwd: Path | None = None
) -> None:
    """The same refusal for the compiler variables of a cargo config's ``[env]`` table, which cargo gives every
    build script (``[env] CC = "clang-22 -fprofile-generate"``): each file's, named with it."""
    for config in configs:
        table = config.data.get("env")
        if isinstance(table, dict):  # a variable is a string or a table with a ``value``
            texts = {name: value.get("value") if isinstance(value, dict) else value for name, value in table.items()}
            env = {name: text for name, text in texts.items() if isinstance(text, str)}
            refuse_profile_flags(env, triple, cross=cross, cwd=cwd, where=f" in [env] of {config.path}")


def profile_flags_in(
    words: Sequence[str], base: Path, name: str, depth: int = 0, source: Path | None = None
) -> list[str]:
    """The profile flags among ``words`` and in the response files (``@file``) they name, those of a file said
    with it (``source``: the file ``words`` come from); a response file that cannot be read or parsed, or nests
    too deep, is refused (``name``: the variable that led to it)."""
    found: list[str] = []
    for word in words:
        if word.startswith(PROFILE_PREFIXES):
            found.append(word if source is None else f"{word} in {source}")
        elif word.startswith("@") and len(word) > 1:
            found += _response_file(base / word[1:], name, depth)
    return found


def _response_file(path: Path, name: str, depth: int) -> list[str]:
    """The profile flags of one response file (clang reads a nested ``@file`` relative to the file naming it)."""
    if depth >= _RSP_DEPTH:
        raise EnvironmentRefused(
            f"{name}: response files nested deeper than {_RSP_DEPTH} at {path} (a file that names itself?)",
            "give the C compiler's flags without a cycle of @files",
        )
    try:
        if path.exists() and not path.is_file() and not path.is_dir():  # reading a fifo waited forever before
            raise OSError(0, "not a file: a fifo, socket or device")
        words = shlex.split(path.read_text(encoding="utf-8"), comments=False)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise EnvironmentRefused(
            f"{name} names the response file {path}, which cannot be read ({why})",
            "the pipeline reads every @file of the C compilers' flags for profile flags: make it readable (a "
            "relative one is read from the crate's directory), or give the flags themselves",
        ) from exc
    return profile_flags_in(words, path.parent, name, depth + 1, path)


def _choice_words(var: str, *, choice: tuple[str, ...] | bool | None) -> str:
    """How a choice was given, for the lines that name it: ``PGO_C=1``, ``PGO_CXX=0``, ``PGO_C=zstd-sys,brotli``."""
    if isinstance(choice, tuple):
        return f"{var}={','.join(choice)}"
    return f"{var}={'1' if choice else '0'}"


def refuse_unknown_packages(
    choices: Mapping[str, bool | tuple[str, ...] | None], packages: frozenset[str], scripts: frozenset[str]
) -> None:
    """A ``PGO_C``/``PGO_CXX`` list naming a package that is not in the build (a typo), or one without a build
    script (it compiles no C): refused before anything is built, with the packages that have one."""
    for var, choice in choices.items():
        if not isinstance(choice, tuple):
            continue
        for name in choice:
            if name in scripts:
                continue
            why = (
                "has no build script: it compiles no C or C++" if name in packages else "is not a package of this build"
            )
            raise ConfigError(
                f"{_choice_words(var, choice=choice)}: {name} {why}",
                f"the packages with a build script (the C and C++ there is to profile): {', '.join(sorted(scripts))}"
                if scripts
                else f"no package of this build has a build script: unset {var}",
            )


def plan_c(
    rustc: RustcInfo,
    env: Mapping[str, str],
    triple: str,
    *,
    setting: bool | tuple[str, ...] | None,
    clang: str | None,
    zigbuild: bool,
    cwd: Path | None = None,
    cargo_configs: Sequence[CargoConfigFile] = (),
    cxx: bool | tuple[str, ...] | None = None,
) -> CPlan:
    """Whether and how the C and C++ of build scripts get the profile.

    Default (``PGO_C`` unset): on when the target is the host and a clang of rustc's LLVM major is there; a
    user's ``CC``/``CXX`` (any of the variables cc-rs reads) is kept, and profiled when it is such a clang.
    ``PGO_C=1`` (or ``PGO_CLANG``) refuses what stops it; ``PGO_C=0`` leaves the C as the plain build has it;
    ``PGO_C=a,b`` profiles the C of those packages' build scripts only (the others' goes to the compiler the build
    would use, without the profile). ``PGO_CXX`` (1, 0 or a list) decides the C++ alone (unset: as ``PGO_C``).
    Each profiled compiler compiles a tiny file first (:func:`probe`): one whose object is not clang's is refused,
    one that cannot compile for the target (no C++ headers) leaves that language alone, or is refused when asked
    for."""
    cross = triple != rustc.host
    refuse_profile_flags(env, triple, cross=cross, cwd=cwd)
    refuse_config_env_profile_flags(cargo_configs, triple, cross=cross, cwd=cwd)
    choices = {"C": ("PGO_C", setting), "C++": ("PGO_C", setting) if cxx is None else ("PGO_CXX", cxx)}
    modes = {
        name: "off" if choice is False else ("on" if choice is True or isinstance(choice, tuple) or clang else "auto")
        for name, (_, choice) in choices.items()
    }
    for var, choice in choices.values():
        if isinstance(choice, tuple) and cross:
            raise ConfigError(
                f"{_choice_words(var, choice=choice)} names packages for {triple}, which is not the host "
                f"{rustc.host}: the C of the packages it leaves out would go to the host's compiler",
                f"give {var}=1 (every package's C by clang --target) or {var}=0 for another target",
            )
    found = find_clang(rustc, env, clang) if any(mode != "off" for mode in modes.values()) and not zigbuild else None
    where = _Where(rustc, env, triple, cross, zigbuild, found, clang)
    languages = [
        _plan_language(where, name, var, flags_var, default, choices[name], modes[name])
        for name, var, flags_var, default in (("C", "CC", "CFLAGS", "cc"), ("C++", "CXX", "CXXFLAGS", "c++"))
    ]
    return CPlan(triple, tuple(languages), modes["C"], env=env)


#: why cargo zigbuild's C is not profiled
_ZIGBUILD_OFF = (
    "cargo zigbuild: zig's own clang, of another LLVM than rustc's, compiles the C, and cannot read rustc's profile"
)


@dataclass(frozen=True)
class _Where:
    """What :func:`plan_c` plans each language for: the toolchain, environment and target, and the clang found."""

    rustc: RustcInfo
    env: Mapping[str, str]
    triple: str
    cross: bool
    zigbuild: bool
    found: Path | None
    clang: str | None


def _plan_language(
    where: _Where,
    name: str,
    var: str,
    flags_var: str,
    default: str,
    chosen: tuple[str, bool | tuple[str, ...] | None],
    mode: str,
) -> Language:
    """One language's part of the plan: its compiler (probed), or why it stays unprofiled (refused if asked)."""
    rustc, env, triple, clang = where.rustc, where.env, where.triple, where.clang
    chosen_var, choice = chosen
    asked = _choice_words(chosen_var, choice=choice) if mode == "on" and choice is not None else "PGO_C=1"
    user_name = next((n for n in env_names(var, triple, cross=where.cross) if env.get(n, "").strip()), None)
    host = tuple(env[user_name].split()) if user_name else (default,)
    compiler, version, off = language_compiler(
        where, name, mode=mode, user=user_name, off_words=f"{chosen_var}=0", asked=asked
    )
    if compiler is not None:
        own = f"{'PGO_CLANG' if clang else 'clang'} {' '.join(compiler)}"
        what = f"{user_name}={env[user_name]} (yours)" if user_name else own
        off = probe(
            name, compiler, triple, cross=where.cross, env=env, rustc=rustc, what=what, strict=mode == "on", asked=asked
        )
        if off is not None:
            compiler, version = None, None
    if off is not None and mode == "on":
        raise ToolchainError(f"{asked} but the {name} of build scripts cannot get the profile: {off}", "")
    crates = choice if isinstance(choice, tuple) else None
    chosen_by = asked if crates is not None else ""
    return Language(name, var, flags_var, compiler, host, version, off, crates, chosen_by)


def language_compiler(
    where: _Where, name: str, *, mode: str, user: str | None, off_words: str, asked: str
) -> tuple[tuple[str, ...] | None, str | None, str | None]:
    """The compiler of one language's target C when the profile can reach it, its clang version, else why not
    (``off_words``: the setting that turned it off; ``asked``: the one that asked for it, in refusals)."""
    rustc, env, triple, found, clang = where.rustc, where.env, where.triple, where.found, where.clang
    if mode == "off":
        return None, None, off_words
    if where.zigbuild:
        return None, None, _ZIGBUILD_OFF
    if user is not None:
        host = tuple(env[user].split())
        version = clang_version(host, env)
        if version is not None and int(version.split(".")[0]) == rustc.llvm_major:
            return host, version, None
        what = f"clang {version}" if version else "not clang"
        return None, None, f"{user}={env[user]} (yours) is {what}, not clang {rustc.llvm_major}"
    if where.cross and mode == "auto":
        return (
            None,
            None,
            f"{triple} is not the host: set PGO_C=1 to compile its {name} with clang {rustc.llvm_major} --target",
        )
    if found is None:
        way = clang_route(rustc, env)
        if mode == "on":
            raise ToolchainError(
                f"{asked} but no clang of LLVM {rustc.llvm_major} (rustc {rustc.release}) is found",
                f"`{way}`, or PGO_C=0 to leave the C unprofiled"
                if way == package(rustc.llvm_major)
                else f"{way}, or PGO_C=0 to leave the C unprofiled",
            )
        return None, None, f"no clang-{rustc.llvm_major} ({way})"
    # the C++'s is clang++ beside clang: clang-22 -> clang++-22, clang -> clang++
    path = found if name == "C" else found.with_name(found.name.replace("clang", "clang++", 1))
    if not path.is_file():
        if clang or mode == "on":
            raise ToolchainError(
                f"{'PGO_CLANG=' + clang if clang else found}: there is no {path.name} beside it ({path}) for the C++ "
                "of build scripts",
                f"put a clang++ of LLVM {rustc.llvm_major} there, or give it as CXX=<clang++ of LLVM "
                f"{rustc.llvm_major}> (yours is kept, and profiled), or PGO_C=0",
            )
        return None, None, f"no {path.name} beside {found}"
    what = "PGO_CLANG" if clang else "the clang of rustc's LLVM"
    return (str(path),), check_major(str(path), clang_version([str(path)], env), rustc, what), None


#: a tiny source of each language, compiled by :func:`probe`; the C++ needs the standard library's headers
_PROBES = {
    "C": ("pgo-probe.c", "int pgo_probe(int x) { return x + 1; }\n"),
    "C++": ("pgo-probe.cpp", "#include <new>\nint pgo_probe(int x) { return *new (&x) int(x + 1); }\n"),
}
#: Debian's architecture of a Rust triple's, for the C++ headers' package
_DEBIAN_ARCH = {"aarch64": "arm64", "x86_64": "amd64", "i686": "i386", "armv7": "armhf", "riscv64gc": "riscv64"}


def probe(
    name: str,
    compiler: Sequence[str],
    triple: str,
    *,
    cross: bool,
    env: Mapping[str, str],
    rustc: RustcInfo,
    what: str,
    strict: bool,
    asked: str = "PGO_C=1",
) -> str | None:
    """Compile a tiny file of language ``name`` with ``compiler`` for ``triple`` (``--target`` when ``cross``, as
    cc-rs gives clang) before anything is built: None when it compiles with clang of rustc's major; why not when it
    cannot compile (its first error, and the package of the C++ standard library's headers when those are missing
    for the target: refused when ``strict``, PGO_C=1); a compiler whose object's ``.comment`` is not clang of
    rustc's major (a script that says clang and runs gcc) is refused."""
    file_name, text = _PROBES[name]
    shown = " ".join(compiler)
    with tempfile.TemporaryDirectory(prefix="pgo-cprobe-") as tmp:
        source, obj = Path(tmp) / file_name, Path(tmp) / "pgo-probe.o"
        source.write_text(text, encoding="utf-8")
        argv = [*compiler, *([f"--target={triple}"] if cross else []), "-c", str(source), "-o", str(obj)]
        try:
            done = query(argv, env=env, cwd=Path(tmp))
        except OSError as exc:
            return f"{shown} cannot be run ({exc.strerror or exc})"
        seen = read_object(obj) if done.returncode == 0 else None
    if done.returncode != 0:
        match = re.search(r"(fatal error|error): (.*)", done.stderr)
        lines = done.stderr.strip().splitlines()
        error = f"{match.group(1)}: {match.group(2).strip()}" if match else (lines[-1] if lines else "no output")
        headers = name == "C++" and "file not found" in error
        install = _cxx_headers_package(triple, env, cross=cross) if headers else ""
        why = f"{shown} cannot compile {name} for {triple}: {error}" + (
            " (no C++ standard library headers)" if headers else ""
        )
        if strict:
            leave = (
                "PGO_CXX=0 to leave the C++ unprofiled (the C keeps the profile)"
                if name == "C++"
                else "PGO_C=0 to leave the C unprofiled"
            )
            raise ToolchainError(
                f"{asked} but {why}",
                (f"`apt-get install {install}`, " if headers else "")
                + f"or give {'CXX' if name == 'C++' else 'CC'}=<a compiler of clang's major that can>, or {leave}",
            )
        return why + (f": `apt-get install {install}`" if headers else "")
    said = seen.compiler if seen is not None else "no ELF object"
    if seen is None or clang_major_of(said) != rustc.llvm_major:
        raise ToolchainError(
            f"{what} is not clang {rustc.llvm_major}: the {name} object it compiled ({obj.name}) says "
            f"{said!r} in .comment",
            f"give a real clang of LLVM {rustc.llvm_major} (Debian: `{package(rustc.llvm_major)}`), or PGO_C=0",
        )
    return None


def _cxx_headers_package(triple: str, env: Mapping[str, str], *, cross: bool) -> str:
    """Debian's package of the C++ standard library's headers for ``triple``, of the system gcc's major (clang
    uses gcc's libstdc++): ``libstdc++-12-dev-arm64-cross``, ``libstdc++-12-dev`` for the host."""
    try:
        major = capture(["gcc", "-dumpversion"], env=env).strip().split(".")[0] or "12"
    except PgoError:
        major = "12"
    if not cross:
        return f"libstdc++-{major}-dev"
    arch = triple.split("-", maxsplit=1)[0]
    return f"libstdc++-{major}-dev-{_DEBIAN_ARCH.get(arch, arch)}-cross"


def wrapper_script(
    lang: Language, triple: str, drop: Sequence[str], warn: Sequence[str], base: Sequence[str] = ()
) -> str:
    """The ``CC_<triple>`` of a build: the target's C to clang with the flags (``drop``: the profile's, ``base``:
    every build's), the host's to its own compiler without either. With a list of packages (``lang.crates``), the
    target C of a package it does not name goes to the compiler the build would use, with ``base`` and without the
    profile flags (cargo gives the build script, and so cc-rs's compiler, ``CARGO_PKG_NAME``)."""
    if lang.compiler is None:
        raise ValueError(f"no {lang.name} compiler to wrap")  # c_env wraps only the languages that have one
    target_cmd = shlex.join(lang.compiler)
    host_cmd = shlex.join(lang.host)
    drops = " | ".join(shlex.quote(f) for f in drop) or "''"
    bases = " | ".join(shlex.quote(f) for f in base) or "''"
    extra = shlex.join(warn)
    if lang.crates is None:
        target = f'exec {target_cmd} "$@" {extra} ;;'
        listed = ""
    else:
        names = " | ".join(shlex.quote(c) for c in lang.crates)
        target = (
            f'case "${{CARGO_PKG_NAME:-}}" in\n'
            f'      {names}) exec {target_cmd} "$@" {extra} ;;\n'
            "    esac\n"
            "    keep_base=1 ;;"
        )
        listed = f" ({lang.chosen_by}: the others' to the build's own compiler, unprofiled)"
    return f"""#!/bin/sh
# Written by pgo-recipes: the {lang.name} compiler of build scripts. cc-rs reads {lang.var}_<triple> for the host's
# build scripts too when the target is the host: only the target's {lang.name} gets clang and the profile flags{listed}.
keep_base=
case "${{OUT_DIR:-}}" in
  */{triple}/release/build/*)
    {target}
esac
for arg do
  shift
  case "$arg" in
    {drops}) ;;
    {bases}) [ -z "$keep_base" ] || set -- "$@" "$arg" ;;
    *) set -- "$@" "$arg" ;;
  esac
done
exec {host_cmd} "$@"
"""


def c_env(
    plan: CPlan, base_env: Mapping[str, str], flags: Sequence[str], bin_dir: Path, *, optimise: bool
) -> dict[str, str]:
    """A new environment whose target C and C++ get ``flags`` (appended to the user's ``CFLAGS_<triple>``, which
    cc-rs joins with ``CFLAGS``, ``HOST_CFLAGS`` and the rest), through :func:`wrapper_script`; a language the plan
    does not profile keeps the build's own compiler, with the plan's ``base_flags`` alone."""
    env = dict(base_env)

    def add(name: str, *added: str) -> None:
        env[name] = " ".join([*env.get(name, "").split(), *added])

    if not plan.enabled:
        for flags_var in ("CFLAGS", "CXXFLAGS") if plan.base_flags else ():
            add(target_var(flags_var, plan.triple), *plan.base_flags)
        return env
    for flag in [*plan.base_flags, *flags]:
        if any(ch.isspace() for ch in flag):
            raise ConfigError(
                f"{flag!r} contains white space, which CFLAGS cannot carry (cc-rs splits it on white space)",
                "use a work dir and profile store whose paths have no spaces",
            )
    for lang in plan.languages:
        flags_name = target_var(lang.flags_var, plan.triple)
        if lang.compiler is None:  # PGO_CXX=0 beside a profiled C: the system's C++, with every build's flags
            if plan.base_flags:
                add(flags_name, *plan.base_flags)
            continue
        script = bin_dir / f"{lang.var.lower()}-{plan.triple}"
        text = wrapper_script(lang, plan.triple, flags, WARN_FLAGS if optimise else (), plan.base_flags)
        with atomic_output(script) as tmp:
            tmp.write_text(text, encoding="utf-8")
            tmp.chmod(0o755)
        env.pop(f"{lang.var}_{plan.triple}", None)  # the user's, if any, is the wrapper's compiler now
        env[target_var(lang.var, plan.triple)] = str(script)
        add(flags_name, *plan.base_flags, *flags)
    env["CC_ENABLE_DEBUG_OUTPUT"] = "1"  # cc-rs logs its commands: which flags reached which compiler
    return env


# --- a build script's C that the profile's clang cannot build ------------------------------------------------

_CC_RS_FAILED = re.compile(r"error occurred in cc-rs: command did not execute successfully \([^)]*\)\)?: (?P<cmd>.*)$")
_SOURCE_ERROR = re.compile(
    r"^warning: (?P<pkg>[^\s@:]+)@\S+: (?P<file>[^\s:]+):\d+:\d+: (?:fatal )?error: (?P<text>.*)$"
)
_DRIVER_ERROR = re.compile(r"^warning: (?P<pkg>[^\s@:]+)@\S+: \S+: error: (?P<text>.*)$")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")
#: the errors of cc-rs's own probes of the compiler's family (``-?``), in every build script's output
_PROBE_NOISE = ("unknown argument: '-?'", "no input files")


def _commands(text: str, find: Callable[[str], re.Match[str] | None]) -> Iterator[tuple[re.Match[str], list[str]]]:
    """The commands cc-rs printed in ``text``: each line ``find`` matches, with the words of its ``cmd`` group (a
    line whose quoting does not close is passed over)."""
    for line in text.splitlines():
        if (match := find(line)) is None:
            continue
        try:
            words = shlex.split(match.group("cmd"))
        except ValueError:
            continue
        yield match, words


def refuse_clang_cannot_build(plan: CPlan, log: Path) -> None:
    """A failed build whose build script's C or C++ the pipeline's clang wrapper could not compile (a published -sys
    crate adds ``-stdlib=libc++`` when the compiler takes it: clang++ does, g++ does not, and without libc++'s
    headers ``#include <new>`` is not found) is refused in one line naming the crate, the compiler, the error and
    the flag, with the ways out; any other failure is left to the caller (cargo's own line)."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    wrappers = {f"cc-{plan.triple}": "C", f"cxx-{plan.triple}": "C++"}
    out_of = re.compile(re.escape(f"/{plan.triple}/release/build/") + r"(?P<pkg>[^/]+)-[0-9a-f]{16}/out/")
    for _found, words in _commands(text, _CC_RS_FAILED.search):
        while words and _ASSIGNMENT.fullmatch(words[0]):
            words = words[1:]  # cc-rs 1.2 says the environment first: LC_ALL="C" "…/cxx-<triple>" …
        name = wrappers.get(Path(words[0]).name) if words else None
        lang = next((lang for lang in plan.languages if lang.name == name), None)  # None: not a wrapper
        if lang is None or lang.compiler is None:
            continue  # not the pipeline's wrapper: cargo's own line says it
        # the object's OUT_DIR: the target's (the host's C of build-dependencies goes to the host's compiler)
        dirs = [m.group("pkg") for w in words if (m := out_of.search(w))]
        if not dirs or not lang.profiles(dirs[0]):
            continue  # the wrapper ran the build's own compiler for it
        pkg = dirs[0]
        raise CommandFailed(_cannot_build_line(lang, pkg, words, text), _cannot_build_hint(lang, pkg, log))


def _cannot_build_line(lang: Language, pkg: str, words: Sequence[str], text: str) -> str:
    lines = text.splitlines()
    source = next((m for line in lines if (m := _SOURCE_ERROR.match(line)) and m.group("pkg") == pkg), None)
    driver = (m.group("text").strip() for line in lines if (m := _DRIVER_ERROR.match(line)) and m.group("pkg") == pkg)
    error = (
        f"{source.group('file')}: {source.group('text').strip()}"
        if source
        else next((said for said in driver if said not in _PROBE_NOISE), "see the log")
    )
    stdlib = [w for w in words if w.startswith("-stdlib=")]
    said = f"{' '.join(lang.compiler or ())} (clang of rustc's LLVM, the profile's compiler)"
    line = f"the {lang.name} of crate {pkg}'s build script does not build with {said}: {error}"
    if stdlib:
        line += (
            f", with {stdlib[0]}, which its build script gives when the compiler accepts it (clang++ does, g++ does "
            "not)"
        )
        if "file not found" in error and stdlib[0] == "-stdlib=libc++":
            line += f" and this clang has no {stdlib[0][len('-stdlib=') :]} headers"
    return line


def _cannot_build_hint(lang: Language, pkg: str, log: Path) -> str:
    others = f"PGO_C=<the packages but {pkg}> profiles only theirs"
    if lang.name == "C++":
        major = (lang.version or "").split(".")[0] or "<major>"
        return (
            f"PGO_CXX=0 leaves the C++ to the system's c++, unprofiled, and the C profiled; or {others}; or "
            f"`apt-get install libc++-{major}-dev libc++abi-{major}-dev` if the crate is to link libc++; see {log}"
        )
    return f"{others}; or PGO_C=0; see {log}"


# --- what the builds did -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CObject:
    path: Path
    compiler: str  # the .comment line: "Debian clang version 22.1.8 (…)", "GCC: (Debian …) 12.2.0"
    instrumented: bool
    functions: tuple[str, ...]
    #: those of ``functions`` bound locally (``static``): a profile names each ``<its source file>;<name>``
    local: frozenset[str] = frozenset()


def read_object(path: Path) -> CObject | None:
    """What an object file says of itself; None when it is not ELF."""
    try:
        with path.open("rb") as stream:
            elf = ELFFile(stream)
            comment = elf.get_section_by_name(".comment")
            lines = [] if comment is None else [p.decode("utf-8", "replace") for p in comment.data().split(b"\0") if p]
            names = {s.name for s in elf.iter_sections()}
            table = elf.get_section_by_name(".symtab")
            defined = []
            if isinstance(table, SymbolTableSection):
                defined = [
                    s
                    for s in table.iter_symbols()
                    if s["st_info"]["type"] == "STT_FUNC" and s["st_shndx"] != "SHN_UNDEF" and s.name
                ]
            functions = sorted(s.name for s in defined)
            local = frozenset(s.name for s in defined if s["st_info"]["bind"] == "STB_LOCAL")
    except (ELFError, OSError):
        return None
    compiler = next(
        (c for c in reversed(lines) if "clang version" in c or c.startswith("GCC:")), lines[-1] if lines else ASSEMBLED
    )
    return CObject(path, compiler.strip(), "__llvm_prf_cnts" in names, tuple(functions), local)


#: the compiler of an object whose .comment names none: assembled (clang's and GNU as's write no .comment)
ASSEMBLED = "unknown"
#: how rustc names itself in an object's .comment: a build script's probe of the compiler (arrayvec 0.4's
#: ``rustc --emit=obj -`` leaves ``rust_out.o`` in its OUT_DIR) is Rust, not the crate's C
RUST_OBJECT = "rustc version "

_BUILD_DIR = re.compile(r"^(?P<pkg>.+)-[0-9a-f]{16}$")


def out_dirs_named(log_text: str, build: Path) -> set[str]:
    """The ``OUT_DIR``s under ``build`` (``<pkg>-<hash>``) that a build log names: the ``-L native=`` of its rustc
    commands, cc-rs's compile commands and ``OUT_DIR`` (cargo -v, -vv)."""
    pattern = re.compile(re.escape(str(build)) + r"/(?P<dir>[^/\s`'\"]+)/out(?![^/\s`'\"])")
    return {m.group("dir") for m in pattern.finditer(log_text)}


def _out_dirs(target_dir: Path, triple: str, log_text: str) -> list[tuple[str, Path]]:
    """Each target build script's ``OUT_DIR`` of this build, with its package (see :func:`c_objects`)."""
    build = target_dir / triple / "release" / "build"
    if not build.is_dir():
        return []
    named = out_dirs_named(log_text, build)
    named_pkgs = {m.group("pkg") for d in named if (m := _BUILD_DIR.match(d))}
    outs = [(m.group("pkg"), out) for out in sorted(build.glob("*/out")) if (m := _BUILD_DIR.match(out.parent.name))]
    # not another build's OUT_DIR of a package whose OUT_DIRs the log names
    return [(pkg, out) for pkg, out in outs if pkg not in named_pkgs or out.parent.name in named]


def c_objects(target_dir: Path, triple: str, *, log_text: str = "") -> dict[str, list[CObject]]:
    """The objects each target build script left in its ``OUT_DIR``, by package (build-dependencies and
    proc-macros, built for the host, are elsewhere: ``<target dir>/release/build/``).

    A target dir shared by builds of other settings (the optimised build's ``target/``, after a ``PGO_C=0`` run,
    a plain build or another ``PGO_OUT``) holds an ``OUT_DIR`` of each: of a package whose ``OUT_DIR``s the build's
    log names (``log_text``), only those are read, the others being another build's."""
    found: dict[str, list[CObject]] = {}
    for pkg, out in _out_dirs(target_dir, triple, log_text):
        objects = [
            o
            for p in sorted(out.rglob("*.o"))
            if p.is_file() and (o := read_object(p)) is not None and not o.compiler.startswith(RUST_OBJECT)
        ]
        # where the script links static libraries of its OUT_DIR, their members: not the objects it compiled and
        # left unlinked (jemalloc's make compiles each file thrice: .o, .pic.o and .sym.o, and links the .pic.o)
        members = linked_members(out)
        objects = [o for o in objects if o.path.name in members] or objects
        if objects:
            found.setdefault(pkg, []).extend(objects)
    return found


def kept_lines(out: Path, name: str) -> list[str]:
    """The lines of what cargo kept of a build script's last run beside its ``OUT_DIR`` ``out``: ``output`` (its
    stdout, the ``cargo:`` instructions among it) or ``stderr``; none when it cannot be read."""
    try:
        return (out.parent / name).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


#: a build script's instructions to cargo (its ``output``): a library to link, a folder to find it in
_LINK_LIB = re.compile(r"^cargo::?rustc-link-lib=(?:(?P<kind>[a-z-]+)(?::[^=]*)?=)?(?P<name>[^\s=]+)\s*$")
_LINK_SEARCH = re.compile(r"^cargo::?rustc-link-search=(?:[a-z]+=)?(?P<dir>.+?)\s*$")


def linked_members(out: Path) -> set[str]:
    """The members' names of the static libraries (``lib<name>.a``) in ``out`` (an ``OUT_DIR``) that its build
    script links (``cargo:rustc-link-lib``, found on its ``rustc-link-search`` folders, in what cargo kept of its
    output); none when it links none from there."""
    lines = kept_lines(out, "output")
    names = [m["name"] for m in map(_LINK_LIB.match, lines) if m and m["kind"] in (None, "static")]
    folders = [Path(m["dir"]) for m in map(_LINK_SEARCH.match, lines) if m]
    archives = {f / f"lib{name}.a" for f in folders if f.is_relative_to(out) for name in names}
    return {member for a in sorted(archives) if a.is_file() for member in archive_members(a)}


def archive_members(path: Path) -> list[str]:
    """The names of the members of an ``ar`` archive (GNU's long names too); none when it is not one (a thin
    archive's members are paths, not copies: none either)."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    if not data.startswith(b"!<arch>\n"):
        return []
    names: list[str] = []
    long_names = b""
    at = 8
    while at + 60 <= len(data):
        header = data[at : at + 60]
        try:
            size = int(header[48:58].decode("ascii"))
        except ValueError:
            return names  # damaged: what was read so far
        raw = header[:16].rstrip(b" ")
        body = data[at + 60 : at + 60 + size]
        if raw == b"//":
            long_names = body
        elif raw.startswith(b"/") and raw[1:].isdigit():
            start = int(raw[1:])
            names.append(long_names[start:].split(b"/\n", 1)[0].decode("utf-8", "replace"))
        elif raw not in (b"/", b"/SYM64/"):
            names.append(raw.removesuffix(b"/").decode("utf-8", "replace"))
        at += 60 + size + size % 2
    return names


def script_commands(target_dir: Path, triple: str, *, log_text: str = "") -> dict[str, list[list[str]]]:
    """cc-rs's compile commands of each target build script, from what cargo kept of its output (``output`` beside
    its ``OUT_DIR``: cc-rs's ``running:`` lines under ``CC_ENABLE_DEBUG_OUTPUT``), whatever the build's verbosity."""
    found: dict[str, list[list[str]]] = {}
    for pkg, out in _out_dirs(target_dir, triple, log_text):
        lines = "\n".join(f"[{pkg} 0] {line}" for line in kept_lines(out, "output") if line.startswith("running: "))
        for words in compile_commands(lines).get(pkg, []):
            found.setdefault(pkg, []).append(words)
    return found


#: clang's warning about a file, as cargo prints a build script's: cc-rs's (``cargo:warning=``, cargo's ``warning:
#: pkg@ver: …``), or the compiler's own stderr under ``-vv`` (``[pkg ver] warning: …``: a build script that runs the
#: compiler itself, as jemalloc-sys's configure and make do)
_C_WARNING = re.compile(
    r"^(?:warning: (?P<pkg>[^\s@:]+)@\S+: |\[(?P<script>[^\s\]]+) [^\s\]]+\] )warning: (?P<file>[^\s:]+): (?P<text>.*)$"
)
_STALE = re.compile(r"hash mismatch\)\s+(?P<fn>\S+)")
_MISSING = re.compile(r"no profile data available for function\s+(?P<fn>\S+)")
_RUNNING = re.compile(r"^\[(?P<pkg>\S+) \S+\] running: (?P<cmd>.*)$")


def script_stderr(target_dir: Path, triple: str, log_text: str) -> str:
    """What each target build script of this build wrote to its stderr, as cargo ``-vv`` prints it (``[pkg 0] …``),
    from the file cargo keeps beside its ``OUT_DIR``: a build script that runs clang itself (jemalloc-sys's make)
    leaves clang's warnings there, and cargo does not print them again when it finds the package fresh."""
    return "".join(
        f"\n[{pkg} 0] {line}"
        for pkg, out in _out_dirs(target_dir, triple, log_text)
        for line in kept_lines(out, "stderr")
    )


@dataclass(frozen=True)
class CWarnings:
    stale: dict[str, list[str]]  # package -> "file: function"
    missing: dict[str, list[str]]


def c_warnings(log_text: str) -> CWarnings:
    """clang's profile warnings in a build log, by package, as cargo prints build-script warnings."""
    stale: dict[str, set[str]] = {}
    missing: dict[str, set[str]] = {}
    for match in filter(None, map(_C_WARNING.match, log_text.splitlines())):
        text, pkg, file = match.group("text"), match.group("pkg") or match.group("script"), match.group("file")
        if match.group("script") and not file.endswith((".c", ".h", *_CXX_SUFFIXES)):
            continue  # rustc's, of a build script's probe (autocfg's probe1.<hash>-cgu.0): not the crate's C
        if s := _STALE.search(text):
            stale.setdefault(pkg, set()).add(f"{file}: {s.group('fn')}")
        elif m := _MISSING.search(text):
            missing.setdefault(pkg, set()).add(f"{file}: {m.group('fn')}")
    return CWarnings({k: sorted(v) for k, v in stale.items()}, {k: sorted(v) for k, v in missing.items()})


def compile_commands(log_text: str) -> dict[str, list[list[str]]]:
    """cc-rs's compile commands (``CC_ENABLE_DEBUG_OUTPUT``), by package: those with ``-c``."""
    found: dict[str, list[list[str]]] = {}
    for match, words in _commands(log_text, _RUNNING.match):
        if "-c" in words:
            found.setdefault(match.group("pkg"), []).append(words)
    return found


def c_crates(
    plan: CPlan,
    rustc: RustcInfo,
    target_dir: Path,
    *,
    log_text: str,
    flag: str,
    records: Sequence[str] | None = None,
) -> list[CCrateRecord]:
    """Each package whose target build script compiled C or C++: its compilers (by language where cc-rs's commands
    say which object is of which), whether the profile flag ``flag`` reached every object of the languages the plan
    profiles for it, and (the optimised build: ``records``, the profile's function names) its functions with and
    without profile data, the stale and missing ones clang named. A package a ``PGO_C``/``PGO_CXX`` list leaves
    out is ``chosen: false``: its C is unprofiled by choice."""
    commands = {**script_commands(target_dir, plan.triple, log_text=log_text), **compile_commands(log_text)}
    profile = None if records is None else set(records)
    reading = _Reading(
        plan, rustc, flag, profile, commands, c_warnings(log_text + script_stderr(target_dir, plan.triple, log_text))
    )
    objects = c_objects(target_dir, plan.triple, log_text=log_text)
    return [_crate_entry(reading, pkg, found) for pkg, found in sorted(objects.items())]


@dataclass(frozen=True)
class _Reading:
    """What :func:`c_crates` reads every package's objects with."""

    plan: CPlan
    rustc: RustcInfo
    flag: str
    profile: set[str] | None  # the profile's record names; None: the instrumented build
    commands: dict[str, list[list[str]]]
    warnings: CWarnings


def _crate_entry(reading: _Reading, pkg: str, objects: list[CObject]) -> CCrateRecord:
    """One package's record of :func:`c_crates`."""
    plan, rustc, profile = reading.plan, reading.rustc, reading.profile
    languages = object_languages(reading.commands.get(pkg, []), plan.triple)

    def language(o: CObject) -> str | None:
        return languages[str(o.path)][0] if str(o.path) in languages else None

    def left_by_choice(o: CObject) -> bool:  # an object of a language unprofiled by choice (Language.left_by_choice)
        return any(lang.name == language(o) and lang.left_by_choice(pkg) for lang in plan.languages)

    # what a compiler made (it names itself in .comment); an assembled object (ring's .S, a pregenerated one)
    # names none and has no profile to take: it is counted, not judged. Where cc-rs's commands say each
    # object's language, those of a language left unprofiled by choice are not judged (PGO_CXX=0: its C++ is
    # g++'s; a list that leaves the package out); a user's CC that is gcc is, and makes the crate unprofiled
    made = [o for o in objects if o.compiler != ASSEMBLED]
    compiled = [o for o in made if not left_by_choice(o)]  # all of them where the languages are not known
    right = bool(compiled) and all(clang_major_of(o.compiler) == rustc.llvm_major for o in compiled)
    if profile is None:  # the instrumented build: the objects say it
        # an object that defines no function (a table of constants) has no counters to carry
        with_code = [o for o in compiled if o.functions]
        reached = bool(with_code) and all(o.instrumented for o in with_code)
    else:
        commands = reading.commands.get(pkg, [])
        by_object = {cmd[cmd.index("-o") + 1]: cmd for cmd in commands if "-o" in cmd[:-1]}
        judged = {str(o.path) for o in compiled}
        cmds = [c for obj, c in by_object.items() if obj in judged] if languages else commands
        reached = right and plan.profiles(pkg) and all(reading.flag in cmd for cmd in cmds)
    entry: CCrateRecord = {
        "crate": pkg,
        "objects": len(objects),
        "compilers": sorted({o.compiler for o in objects}),
        "profile_flags": reached,
    }
    if (not plan.profiles(pkg) and plan.left_out(pkg)) or (made and not compiled):
        entry["chosen"] = False  # a list leaves it out, or all of its C is of a language left alone (PGO_CXX=0)
    if languages:  # cc-rs's commands are known (the wrapper's CC_ENABLE_DEBUG_OUTPUT): each language's compilers
        entry["languages"] = {
            lang: sorted({o.compiler for o in objects if language(o) == lang})
            for lang in sorted({lang for lang, _ in languages.values()})
        }
        # an object the pipeline's clang wrapper compiled for a package it profiles must say clang of rustc's
        # major in .comment (one of a package a list leaves out is the build's own compiler's)
        entry["not_clang"] = [
            f"{o.path}: {o.compiler}"
            for o in compiled
            if languages.get(str(o.path), ("", False))[1] and clang_major_of(o.compiler) != rustc.llvm_major
        ]
    if profile is not None:
        _add_functions(entry, reading, pkg, objects, compiled, reached=reached)
    return entry


def _add_functions(
    entry: CCrateRecord, reading: _Reading, pkg: str, objects: list[CObject], compiled: list[CObject], *, reached: bool
) -> None:
    """The optimised build's part of a package's record: its functions with and without profile data (each as the
    profile names it: :func:`function_keys`), and the stale and missing ones clang named."""
    records = reading.profile or set()
    commands = reading.commands.get(pkg, [])
    functions = function_keys(compiled, commands, records)
    # profile data counts only where the profile flag reached the C (PGO_C=0, gcc's C: none of it)
    with_profile = [f for f in functions if reached and f in records]
    # the objects of a language the plan leaves to the build's own compiler (PGO_CXX=0): without profile
    others = function_keys([o for o in objects if o.compiler != ASSEMBLED and o not in compiled], commands, records)
    entry["functions_with_profile"] = with_profile
    entry["functions_without_profile"] = sorted({*(f for f in functions if f not in with_profile), *others})
    entry["stale"] = reading.warnings.stale.get(pkg, [])  # every one: a stale function refuses the build
    # those of the functions counted: not of a copy the build script left unlinked (jemalloc's .sym.o)
    counted = {f.rpartition(";")[2] for f in (*functions, *others)}
    entry["missing"] = [m for m in reading.warnings.missing.get(pkg, []) if m.rpartition(": ")[2] in counted]


#: cc-rs's name of an object: ``<16 hex digits>-<the source's stem>.o``
_CC_RS_OBJECT = re.compile(r"^[0-9a-f]{16}-")


def _stem(name: str) -> str:
    """A file's name to its first dot, without cc-rs's prefix: ``a445302c6d3dcb51-regexec.o`` and
    ``oniguruma/src/regexec.c`` are ``regexec``, jemalloc's ``src/arena.pic.o`` is ``arena``."""
    return _CC_RS_OBJECT.sub("", Path(name).name).split(".", 1)[0]


def function_keys(objects: Sequence[CObject], commands: Sequence[Sequence[str]], records: Iterable[str]) -> list[str]:
    """The functions ``objects`` define, each as a profile names it: a global one by its symbol (one, however many
    objects define it: an inline function of a header, as the binary keeps one), a local (``static``) one
    ``<source>;<name>``, its source file as the compile command (``commands``: cc-rs's) gave it to clang, so that
    two static functions of one name in two files are two (Oniguruma's ``mbc_enc_len`` is in each encoding's file).
    For an object no command names (jemalloc's make runs clang itself), the source is the file of the ``records``'
    ``<file>;<name>`` of the object's stem, else the object's name."""
    sources = object_sources(commands)
    files: dict[str, list[str]] = {}
    for record in records:
        file, sep, name = record.rpartition(";")
        if sep:
            files.setdefault(name, []).append(file)
    keys: set[str] = set()
    for o in objects:
        source = sources.get(str(o.path))
        for f in o.functions:
            if f not in o.local:
                keys.add(f)
                continue
            if source is None:
                named = next((file for file in files.get(f, []) if _stem(file) == _stem(o.path.name)), o.path.name)
            keys.add(f"{source or named};{f}")
    return sorted(keys)


_CXX_SUFFIXES = (".cpp", ".cc", ".cxx", ".c++", ".C", ".CPP")
_ASM_SUFFIXES = (".s", ".S", ".asm", ".sx")


def object_languages(commands: Sequence[Sequence[str]], triple: str) -> dict[str, tuple[str, bool]]:
    """Each object of cc-rs's compile commands (its ``-o``): its language by the source's suffix ("C", "C++",
    "assembly") and whether the pipeline's wrapper (``cc-<triple>``, ``cxx-<triple>``: clang of rustc's major)
    compiled it."""
    wrappers = {f"cc-{triple}", f"cxx-{triple}"}
    found: dict[str, tuple[str, bool]] = {}
    for obj, (words, source) in _compiled(commands).items():
        lang = "C++" if source.endswith(_CXX_SUFFIXES) else "assembly" if source.endswith(_ASM_SUFFIXES) else "C"
        found[obj] = (lang, Path(words[0]).name in wrappers)
    return found


def object_sources(commands: Sequence[Sequence[str]]) -> dict[str, str]:
    """Each object of cc-rs's compile commands (its ``-o``): its source file, as the command gives it."""
    return {obj: source for obj, (_, source) in _compiled(commands).items() if source}


def _compiled(commands: Sequence[Sequence[str]]) -> dict[str, tuple[Sequence[str], str]]:
    """Each object of compile commands (its ``-o``): the command, and its source (its last word with a dot that is
    not a flag nor the object; "" when none is)."""
    found: dict[str, tuple[Sequence[str], str]] = {}
    for words in commands:
        if "-o" not in words[:-1]:
            continue
        obj = words[words.index("-o") + 1]
        found[obj] = (words, next((w for w in reversed(words) if not w.startswith("-") and w != obj and "." in w), ""))
    return found


def prefix_map_flags(pairs: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """``-ffile-prefix-map=<from>=<to>`` of the release's ``--remap-path-prefix`` pairs, in their order (clang,
    as rustc, lets the last matching one win): ``__FILE__``, debug info and the like of the C are remapped too."""
    return tuple(f"-ffile-prefix-map={src}={dest}" for src, dest in pairs)


def cross_line(plan: CPlan, rustc: RustcInfo) -> str | None:
    """The line of a cross target whose C the pipeline leaves alone (``PGO_C`` unset): every build compiles it
    with the same compiler (cc-rs's default for the target, or the user's), without the profile."""
    if plan.setting != "auto" or plan.triple == rustc.host or plan.enabled:
        return None
    return (
        f"C of build scripts: unprofiled for {plan.triple} (a cross target: not the host {rustc.host}); every build "
        "compiles it alike, with cc-rs's compiler for the target"
    )


def missing_clang(plan: CPlan) -> list[Language]:
    """The languages left unprofiled (``PGO_C`` unset) for want of a clang of rustc's LLVM."""
    return [lang for lang in plan.languages if lang.compiler is None and (lang.off or "").startswith("no clang-")]


def missing_clang_line(plan: CPlan, packages: Sequence[str]) -> str | None:
    """The line said before the build when ``packages`` compile C (a build-dependency on cc or cmake) that no clang
    of rustc's LLVM can profile; it used to be said only after the instrumented build (None: nothing to say)."""
    langs = missing_clang(plan)
    if not langs or not packages:
        return None
    return (
        f"warning: the C of {', '.join(packages)} (build scripts using cc or cmake) will stay unprofiled: "
        f"{langs[0].off}"
    )


def choice_line(plan: CPlan) -> str | None:
    """The line of a language or packages left to the build's own compiler by choice, while the rest of the C is
    profiled: ``PGO_CXX=0`` (the C++ on the system's c++), ``PGO_C=a,b`` (only those packages' C)."""
    if not plan.enabled:
        return None
    parts = [
        f"the {lang.name} of build scripts is compiled by the system's {' '.join(lang.host)}, unprofiled ({lang.off})"
        for lang in plan.languages
        if lang.compiler is None and lang.off and lang.off.endswith("=0")
    ]
    listed: dict[tuple[tuple[str, ...], str], list[Language]] = {}
    for lang in plan.languages:
        if lang.compiler is not None and lang.crates is not None:
            listed.setdefault((lang.crates, lang.chosen_by), []).append(lang)
    for (crates, chosen_by), langs in listed.items():
        names = " and ".join(lang.name for lang in langs)
        hosts = " and ".join(" ".join(lang.host) for lang in langs)
        parts.append(
            f"the {names} of {', '.join(crates)} only {'is' if len(crates) == 1 and len(langs) == 1 else 'are'} "
            f"profiled ({chosen_by}), the other packages' compiled by {hosts}, unprofiled"
        )
    if not parts:
        return None
    profiled = [f"{lang.name} by {' '.join(lang.compiler)}" for lang in plan.languages if lang.compiler is not None]
    return f"warning: {'; '.join(parts)}; the profiled: {', '.join(profiled)}"


def unprofiled(crates: Sequence[CCrateRecord]) -> list[str]:
    """The packages whose C the profile flags did not reach (not those a ``PGO_C`` list leaves out)."""
    return [c["crate"] for c in crates if not c["profile_flags"] and c.get("chosen", True)]


#: the C and C++ runtime's libraries, which every program links: not a package's own C
_RUNTIME_LIBRARIES = frozenset({"c", "m", "dl", "pthread", "rt", "util", "gcc", "gcc_s", "stdc++", "c++", "c++abi"})


def system_libraries(target_dir: Path, triple: str, log_text: str, compiled: Iterable[str]) -> dict[str, list[str]]:
    """The libraries each target build script that compiled no C (not in ``compiled``) links from the system: a
    ``cargo:rustc-link-lib`` of a shared library or of no kind, found in none of its ``rustc-link-search`` folders
    under its ``OUT_DIR`` (libz-sys finding zlib1g-dev's ``libz.so``, openssl-sys ``libssl``): C built elsewhere,
    which no profile reaches. The C runtime's (libc, libm, libstdc++, …) are left out."""
    skip = set(compiled)
    found: dict[str, list[str]] = {}
    for pkg, out in _out_dirs(target_dir, triple, log_text):
        lines = kept_lines(out, "output") if pkg not in skip else []
        folders = [f for m in map(_LINK_SEARCH.match, lines) if m and (f := Path(m["dir"])).is_relative_to(out)]
        for match in map(_LINK_LIB.match, lines):
            name = match["name"] if match and match["kind"] in (None, "dylib") else ""
            built_here = any(list(f.glob(f"lib{name}.*")) for f in folders)
            if name and name not in _RUNTIME_LIBRARIES and not built_here and name not in found.get(pkg, []):
                found.setdefault(pkg, []).append(name)
    return found


def system_libraries_line(libraries: Mapping[str, Sequence[str]]) -> str | None:
    """The line that names the C the profile does not reach because the system built it (None: none)."""
    if not libraries:
        return None
    named = "; ".join(f"{pkg} links {', '.join(f'lib{n}' for n in names)}" for pkg, names in sorted(libraries.items()))
    return f"c code: the system's shared C libraries, built elsewhere, get no profile: {named}"


def unprofiled_warning(crates: Sequence[CCrateRecord], plan: CPlan) -> str | None:
    """The warning line of the packages whose C is unprofiled (None: none is)."""
    missed = [c for c in crates if not c["profile_flags"] and c.get("chosen", True)]
    if not missed:
        return None
    why = "; ".join(f"{lang.name}: {lang.off}" for lang in plan.languages if lang.off)
    named = ", ".join(f"{c['crate']} ({', '.join(c['compilers'])})" for c in missed)
    return (
        f"warning: the profile flags did not reach the C of {named}: it stays unprofiled"
        + (f" ({why})" if why else " (its build script calls the compiler itself, or ignores CFLAGS)")
        + "; PGO_MAX_UNPROFILED_C=0 refuses this"
    )


def check_c(crates: Sequence[CCrateRecord], ceiling: int | None, log: Path) -> None:
    """A stale C function refuses the build; an object the pipeline's clang compiled that says another compiler in
    ``.comment``; more unprofiled C crates than ``ceiling`` too."""
    for crate in crates:
        if wrong := crate.get("not_clang"):
            path, said = wrong[0].split(": ", 1)
            raise CheckFailed(
                f"the C object {path} of crate {crate['crate']} was compiled by {said!r}: the compiler given as "
                "clang of rustc's LLVM is not clang",
                "give a real clang of rustc's LLVM (PGO_CLANG, CC, CXX), or PGO_C=0",
            )
        if crate.get("stale"):
            raise CheckFailed(
                f"the C of crate {crate['crate']} has {len(crate['stale'])} stale-profile warnings (hash mismatch), "
                f"first: {crate['stale'][0]}",
                "the profile is of other C source: train again on this tree",
            )
    missed = unprofiled(crates)
    if ceiling is not None and len(missed) > ceiling:
        raise CheckFailed(
            f"the profile flags did not reach the C of {len(missed)} crates ({', '.join(missed)}), more than "
            f"PGO_MAX_UNPROFILED_C={ceiling}",
            f"compile their C with clang of rustc's LLVM through CC/CFLAGS (see {log}), or raise the ceiling",
        )
