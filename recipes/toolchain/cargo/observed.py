"""What rustc really received: the pipeline's ``RUSTC`` shim, its records, and the checks read from them.

Cargo runs ``$RUSTC_WRAPPER [$RUSTC_WORKSPACE_WRAPPER] $RUSTC args…``: with ``RUSTC`` set to :data:`SHIM`, the
shim is innermost, after every wrapper, so it sees the arguments the compiler gets, whatever stands before it.
It writes one record per invocation into the build's folder (``<work>/observed/<build>/``), whole or not at all,
and execs the real compiler (``RUSTC`` as it was, else ``rustc``). A record is NUL-separated fields:
``pgo-rustc-shim-1``, then ``compiler <path>``, then ``arg <word>`` per argument, or ``argfile @<path> <content>``
for an ``@file`` argument (its content copied, one argument a line, as rustc reads it).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from recipes.errors import CheckFailed
from recipes.llvm.checks import instrumenting_flags, silencing_flags
from recipes.toolchain.cargo.invocation import install_script
from recipes.toolchain.cargo.log import RustcCall, crate_types, own_compiles
from recipes.toolchain.cargo.metadata import CrateInfo

MAGIC = "pgo-rustc-shim-1"

#: the RUSTC of every build: records the final arguments, then execs the real compiler (POSIX sh, run per crate).
#: ``{shell}`` is bash where there is one: dash drops the variables whose names are not identifiers from the
#: environment it passes on, and cargo gives a test harness ``CARGO_BIN_EXE_<bin>``, which may hold a ``-``.
SHIM = r"""#!{shell}
# Written by pgo-recipes: records the arguments rustc really receives, then runs the real compiler.
real=${RECIPES_REAL_RUSTC:-rustc}
case $real in
  */*) ;;
  *) real=$(command -v "$real") || { echo "pgo-recipes: rustc shim: no $RECIPES_REAL_RUSTC on PATH" >&2; exit 127; } ;;
esac
dir=${RECIPES_OBSERVED_DIR:-}
if [ -n "$dir" ]; then
  tmp=$(mktemp "$dir/.rec.XXXXXXXXXX") || exit 1
  {
    printf 'pgo-rustc-shim-1\0compiler\0%s\0' "$real"
    for arg do
      case $arg in
        @*) printf 'argfile\0%s\0' "$arg" && cat -- "${arg#@}" && printf '\0' ;;
        *) printf 'arg\0%s\0' "$arg" ;;
      esac
    done
  } > "$tmp" || { rm -f -- "$tmp"; exit 1; }
  mv -f -- "$tmp" "$dir/${tmp##*/.}"
fi
exec "$real" "$@"
"""

#: the shim's folder under the work dir's bin (not on any PATH) and its name: ``rustc``, so that cargo's log reads
#: ``…/rustc --crate-name …`` as it did and its parsers know the compiler
SHIM_DIR = "observed-rustc"
SHIM_NAME = "rustc"


def install_shim(bin_dir: Path, shell: str = "/bin/sh") -> Path:
    """:data:`SHIM` run by ``shell`` written (when it is not there as it should be) into ``bin_dir``'s
    :data:`SHIM_DIR`; its path."""
    return install_script(bin_dir / SHIM_DIR / SHIM_NAME, SHIM.replace("{shell}", shell, 1))


def env_with_shim(base_env: Mapping[str, str], shim: Path, records: Path) -> dict[str, str]:
    """A new environment whose ``RUSTC`` is ``shim``, recording into ``records``; the real compiler is the
    ``RUSTC`` it had (else ``rustc`` on its PATH)."""
    env = dict(base_env)
    real = env.get("RUSTC", "")
    env["RECIPES_REAL_RUSTC"] = real if real and Path(real) != shim else "rustc"
    env["RECIPES_OBSERVED_DIR"] = str(records)
    env["RUSTC"] = str(shim)
    return env


def fresh_records(records: Path) -> Path:
    """``records`` made empty for a build (the records of an earlier build of that name removed)."""
    records.mkdir(parents=True, exist_ok=True)
    for old in records.iterdir():
        if old.is_file() and (old.name.startswith("rec.") or old.name.startswith(".rec.")):
            old.unlink()
    return records


@dataclass(frozen=True)
class Observed:
    """One invocation the shim saw: the real compiler it ran and the arguments (``@file``s expanded)."""

    compiler: str
    args: tuple[str, ...]
    record: Path

    def call(self) -> RustcCall | None:
        """As a :class:`RustcCall` (its argv starting at the compiler), when it compiles a crate."""
        args = self.args
        if "--crate-name" not in args[:-1]:
            return None
        name = args[args.index("--crate-name") + 1]
        if name == "___":  # cargo asking rustc about the target, not a compile
            return None
        return RustcCall(name, crate_types(args), (self.compiler, *args))


def parse_record(data: bytes, record: Path) -> Observed:
    """One record of the shim (module docstring); a record that is not one is refused, naming it."""
    fields = data.decode("utf-8", errors="surrogateescape").split("\0")
    if len(fields) < 3 or fields[0] != MAGIC or fields[1] != "compiler" or fields[-1] != "":
        raise CheckFailed(
            f"{record} is not a record of the pipeline's rustc shim", "remove the work dir's observed/ and build again"
        )
    compiler, args = fields[2], []
    index = 3
    while index < len(fields) - 1:
        kind = fields[index]
        if kind == "arg" and index + 1 < len(fields) - 1:
            args.append(fields[index + 1])
            index += 2
        elif kind == "argfile" and index + 2 < len(fields) - 1:
            args.extend(fields[index + 2].splitlines())
            index += 3
        else:
            raise CheckFailed(
                f"{record} is a truncated or foreign record of the rustc shim (field {kind!r})",
                "remove the work dir's observed/ and build again",
            )
    return Observed(compiler, tuple(args), record)


def read_records(records: Path) -> list[Observed]:
    """Every record in a build's folder, in the order of their names (none when the folder is missing)."""
    if not records.is_dir():
        return []
    return [parse_record(path.read_bytes(), path) for path in sorted(records.glob("rec.*"))]


def compiles(observed: Iterable[Observed]) -> list[RustcCall]:
    """The crate compiles among the invocations (not cargo's ``-vV`` and ``--print`` queries)."""
    return [call for obs in observed if (call := obs.call()) is not None]


def bin_compiles(calls: Iterable[RustcCall], crate: CrateInfo) -> list[RustcCall]:
    """The compiles of the binary itself (``--crate-name <bin> --crate-type bin``)."""
    name = crate.bin.replace("-", "_")
    return [c for c in own_compiles(calls, crate) if c.crate_name == name and "bin" in c.crate_types]


def wrappers(env: Mapping[str, str], configs: Sequence[tuple[Path, Mapping[str, object]]]) -> list[str]:
    """The wrappers that stand between cargo and rustc: the variables, then ``[build]`` of cargo's configs."""
    found = [
        f"{name}={env[name]}"
        for name in (
            "RUSTC_WRAPPER",
            "RUSTC_WORKSPACE_WRAPPER",
            "CARGO_BUILD_RUSTC_WRAPPER",
            "CARGO_BUILD_RUSTC_WORKSPACE_WRAPPER",
        )
        if env.get(name)
    ]
    for path, data in configs:
        build = data.get("build")
        if isinstance(build, Mapping):
            for key in ("rustc-wrapper", "rustc-workspace-wrapper"):
                if build.get(key):
                    found.append(f"build.{key}={build[key]} ({path})")
    return found


def _by(found: Sequence[str]) -> str:
    return f"by {' and '.join(found)}" if found else "by something between cargo and rustc"


def check_profile_flag(
    calls: Sequence[RustcCall],
    crate: CrateInfo,
    *,
    option: str,
    value: str | None,
    build: str,
    found: Sequence[str],
    harnesses: bool = False,
) -> list[RustcCall]:
    """Refuse a build (``build``) whose binary no observed compile made (with ``harnesses``: none of the package's
    crates or test harnesses), or any of whose crates for the target (its own first, then the workspace's others and
    the dependencies: cargo gives them all the target's rustflags) did not get ``-C <option>[=value]``: ``found``
    names the wrappers that may have dropped it. The own crates' compiles."""
    own = own_compiles(calls, crate, harnesses=harnesses)
    if not (own if harnesses else bin_compiles(own, crate)):
        raise CheckFailed(
            f"rustc never compiled {crate.bin} in {build} ({len(calls)} crate compiles observed): the binary was "
            f"made {_by(found)}, not by rustc",
            "a caching or replacing rustc wrapper cannot build a PGO binary: unset it for the pipeline",
        )
    for call in [*own, *(c for c in calls if c.target is not None and c not in own)]:
        got = call.codegen(option)
        if got is None or (value is not None and got != value):
            wanted = f"-C{option}={value}" if value is not None else f"-C{option}"
            had = f" (it got -C{option}={got})" if got is not None else ""
            raise CheckFailed(
                f"rustc compiled {call.crate_name} in {build} without {wanted}{had}: the flag was dropped {_by(found)}",
                "a wrapper must pass rustc the arguments cargo gives it: fix or unset it for the pipeline",
            )
    return own


def check_compiler(observed: Sequence[Observed], expected: str | None, build: str) -> None:
    """Refuse a build whose invocations ran another compiler than ``expected`` (the plan's RUSTC, when set)."""
    if not expected:
        return
    for obs in observed:
        if obs.compiler != expected and Path(obs.compiler).resolve() != Path(expected).resolve():
            raise CheckFailed(
                f"{build} ran the compiler {obs.compiler}, not the plan's RUSTC={expected} (record {obs.record.name})",
                "build every stage with one rustc: RUSTC, RUSTUP_TOOLCHAIN and PGO_CARGO as the plan had them",
            )


def with_flag(calls: Iterable[RustcCall], option: str, value: str) -> int:
    """How many crate compiles got ``-C <option>=<value>``."""
    return sum(1 for call in calls if call.codegen(option) == value)


def refuse_silenced(
    calls: Sequence[RustcCall], *, build: str, found: Sequence[str], capped: Collection[tuple[str, str | None]] = ()
) -> None:
    """Refuse a compile with the profile that received a flag silencing LLVM's warnings of stale and unprofiled
    functions (:func:`recipes.llvm.checks.silencing_flags`); ``capped``: the crates (name, ``-C metadata``) cargo
    itself gave ``--cap-lints allow`` (the registry's), whose cap is cargo's, not a wrapper's."""
    for call in calls:
        if call.target is None or call.codegen("profile-use") is None:
            continue
        flags = silencing_flags(call.argv)
        if (call.crate_name, call.metadata) in capped:
            flags = [flag for flag in flags if not flag.startswith("--cap-lints")]
        if flags:
            raise CheckFailed(
                f"rustc compiled {call.crate_name} in {build} with {' '.join(flags)}, which silences LLVM's warnings "
                "of stale and unprofiled functions that the pipeline checks",
                f"remove it from the rustflags and from the rustc wrappers ({', '.join(found) or 'none set'}): "
                "a stale profile would pass unseen",
            )


def refuse_instrumented(calls: Sequence[RustcCall], *, build: str, found: Sequence[str]) -> None:
    """Refuse a build to ship one of whose crates for the target rustc compiled with instrumentation
    (:func:`recipes.llvm.checks.instrumenting_flags`: ``-Zinstrument-mcount``, ``-Cinstrument-coverage``, …)."""
    for call in calls:
        if call.target is not None and (flags := instrumenting_flags(call.argv)):
            raise CheckFailed(
                f"rustc compiled {call.crate_name} in {build} with {' '.join(flags)}: the binary would ship "
                "instrumented",
                f"remove it from the rustflags and from the rustc wrappers ({', '.join(found) or 'none set'}): "
                "a binary to ship is built with the profile only",
            )


def cargo_capped(cargo_calls: Iterable[RustcCall]) -> set[tuple[str, str | None]]:
    """The crates (name, ``-C metadata``) whose command, as cargo ran it (its log), starts with ``--cap-lints allow``
    (cargo caps the registry's crates)."""
    capped = set()
    for call in cargo_calls:
        caps = [b for a, b in zip(call.argv, call.argv[1:], strict=False) if a == "--cap-lints"]
        caps += [a.removeprefix("--cap-lints=") for a in call.argv if a.startswith("--cap-lints=")]
        if caps[:1] == ["allow"]:
            capped.add((call.crate_name, call.metadata))
    return capped


def outputs(call: RustcCall) -> list[Path]:
    """The files a crate compile wrote (in its ``--out-dir``, named by its crate name and ``-C extra-filename``:
    the rlib, rmeta, dep-info, the binary)."""
    out_dirs = [b for a, b in zip(call.argv, call.argv[1:], strict=False) if a == "--out-dir"]
    out_dirs += [a.removeprefix("--out-dir=") for a in call.argv if a.startswith("--out-dir=")]
    if not out_dirs:
        return []
    stem = f"{call.crate_name}{call.codegen('extra-filename') or ''}"
    found = Path(out_dirs[-1]).glob(f"*{stem}*")
    return sorted(path for path in found if path.name.removeprefix("lib").startswith(stem) and path.is_file())


def forget(calls: Iterable[RustcCall]) -> None:
    """Remove what the compiles for the target wrote, so that cargo compiles them again next time instead of
    finding them Fresh: a refused build (a wrapper dropped the profile) leaves no crate the next build would take
    unobserved."""
    for call in calls:
        if call.target is not None:
            for path in outputs(call):
                path.unlink(missing_ok=True)
