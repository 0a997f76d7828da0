"""Every build of the pipeline runs rustc through the RUSTC shim (recipes/toolchain/cargo/observed.py); these are the
stages' side of it: the environment of an observed build, and its records and checks afterwards."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator, Mapping, Sequence

from recipes.errors import CheckFailed
from recipes.llvm import checks
from recipes.plan import BuildPlan
from recipes.toolchain.cargo import observed
from recipes.toolchain.cargo.log import RustcCall, rustc_calls
from recipes.toolchain.rustflags import cargo_config_files


def observing(plan: BuildPlan, env: Mapping[str, str], build: str) -> dict[str, str]:
    """``env`` with the shim as RUSTC, recording into ``<work>/observed/<build>/`` (emptied first)."""
    shim = observed.install_shim(plan.workdir.bin, shutil.which("bash", path=plan.env.get("PATH")) or "/bin/sh")
    return observed.env_with_shim(env, shim, observed.fresh_records(plan.workdir.observed(build)))


def with_configured_wrapper(plan: BuildPlan, env: Mapping[str, str]) -> dict[str, str]:
    """``env`` whose RUSTC_WRAPPER is the wrapper cargo would run (the variable, else CARGO_BUILD_RUSTC_WRAPPER,
    else ``[build] rustc-wrapper`` of the crate's cargo configs), so that a wrapper of the pipeline's own (the
    lint wrapper) chains it instead of replacing it."""
    out = dict(env)
    if out.get("RUSTC_WRAPPER") or "RUSTC_WRAPPER" in out:
        return out
    if out.get("CARGO_BUILD_RUSTC_WRAPPER"):
        out["RUSTC_WRAPPER"] = out["CARGO_BUILD_RUSTC_WRAPPER"]
        return out
    for config in cargo_config_files(plan.cwd, plan.env):
        build = config.data.get("build")
        wrapper = build.get("rustc-wrapper") if isinstance(build, Mapping) else None
        if isinstance(wrapper, str) and wrapper:
            # cargo reads a path with a slash relative to the directory above the config's .cargo
            out["RUSTC_WRAPPER"] = str(config.path.parent.parent / wrapper) if "/" in wrapper else wrapper
            return out
    return out


def compiles(plan: BuildPlan, build: str, what: str) -> list[RustcCall]:
    """The crate compiles of ``build`` (``what``, in words), each run by the plan's compiler (its RUSTC)."""
    records = observed.read_records(plan.workdir.observed(build))
    expected = plan.env.get("RUSTC") or None
    if expected is not None and "/" not in expected:  # a name: the shim ran the one of the PATH
        expected = shutil.which(expected, path=plan.env.get("PATH")) or expected
    calls = observed.compiles(records)
    with forgotten_when_refused(calls):  # another compiler's crates are not taken Fresh by the next build
        observed.check_compiler(records, expected, what)
    return calls


def _wrappers(plan: BuildPlan) -> list[str]:
    """The rustc wrappers the plan's environment and the crate's cargo configs set."""
    return observed.wrappers(
        plan.env, [(config.path, config.data) for config in cargo_config_files(plan.cwd, plan.env)]
    )


def check_profile_flag(
    plan: BuildPlan, build: str, what: str, *, option: str, value: str | None, harnesses: bool = False
) -> None:
    """The compiles of ``build`` (each by the plan's compiler), every one for the target with
    ``-C <option>[=<value>]``."""
    calls = compiles(plan, build, what)
    found = _wrappers(plan)
    with forgotten_when_refused(calls):
        observed.check_profile_flag(
            calls, plan.crate, option=option, value=value, build=what, found=found, harnesses=harnesses
        )


@contextlib.contextmanager
def forgotten_when_refused(calls: Sequence[RustcCall]) -> Iterator[None]:
    """A refusal of what rustc received removes what those compiles wrote (:func:`observed.forget`): the next
    build compiles them again, observed, instead of finding them Fresh (the package alone is cleaned)."""
    try:
        yield
    except CheckFailed:
        observed.forget(calls)
        raise


def refuse_silencing_rustflags(plan: BuildPlan) -> None:
    """Before a build with the profile: the rustflags the plan gives it (``CARGO_TARGET_<TRIPLE>_RUSTFLAGS``, the
    ``[build] rustflags`` or ``CARGO_BUILD_RUSTFLAGS`` it carries, the cargo configs' ``[target.<triple>]``) hold no
    flag that silences LLVM's warnings of stale and unprofiled functions."""
    flags = plan.rustflags
    checks.refuse_silencing_flags(flags.base, "; ".join(flags.carried_from) or flags.var)
    checks.refuse_silencing_flags(flags.config_target_flags, f"the cargo configs' [target.{plan.triple}] rustflags")


def check_profile_use(
    plan: BuildPlan, build: str, what: str, *, cargo_log: str | None = None, ships: bool = True
) -> None:
    """After a build with the profile (``build``, ``what`` in words): no compile with it received a flag that
    silences LLVM's warnings of stale and unprofiled functions (``cargo_log``: the build's log, when cargo's own
    ``--cap-lints allow`` reached rustc), and (``ships``) none for the target was instrumented."""
    calls = compiles(plan, build, what)
    found = _wrappers(plan)
    capped = observed.cargo_capped(rustc_calls(cargo_log)) if cargo_log is not None else set()
    with forgotten_when_refused(calls):
        observed.refuse_silenced(calls, build=what, found=found, capped=capped)
        if ships:
            observed.refuse_instrumented(calls, build=what, found=found)


def refuse_instrumented(plan: BuildPlan, build: str, what: str) -> None:
    """After a build that ships (the plain build a release packs too): none of its compiles for the target was
    instrumented."""
    calls = compiles(plan, build, what)
    with forgotten_when_refused(calls):
        observed.refuse_instrumented(calls, build=what, found=_wrappers(plan))
