"""Profile-use knobs measured, not guessed (``--profile-use-args``): the work dir's profile built again with other
LLVM options (``-disable-icp``: no indirect-call promotion; ``-profile-summary-cutoff-hot=…``: another share of
the counts called hot), each a candidate of the bench beside the PGO build the pipeline ships.

A variant is the optimised build's command and flags (the stored profile the pipeline used, the shared base
rustflags, BOLT's relocations when the PGO binary has them) plus ``-Cllvm-args=<option>`` for each option, in its
own target dir (``<work>/variant-target/<slug>``): it differs from the PGO binary in those options alone. The
pipeline's checks are not run on it: it is measured, not shipped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from recipes import report
from recipes.bench.builds import built_c_compilers
from recipes.errors import ConfigError, MissingInput
from recipes.llvm import profdata
from recipes.plan import BuildPlan
from recipes.results import OptimiseResult
from recipes.runner import run, say
from recipes.stages.plain import link_flags
from recipes.toolchain import cflags
from recipes.toolchain.rustc import find_profdata, rustc_sysroot
from recipes.toolchain.rustflags import env_with_rustflags


def parse_variant(text: str) -> tuple[str, ...]:
    """``"-disable-icp -icp-max-prom=1"`` -> the LLVM options; anything that is not one is refused."""
    words = tuple(text.split())
    bad = next((w for w in words if not re.fullmatch(r"-[A-Za-z][\w.-]*(=[\w.,:+-]+)?", w)), None)
    if not words or bad is not None:
        raise ConfigError(
            f"--profile-use-args {text!r}: {'no option' if not words else repr(bad) + ' is not an LLVM option'}",
            "give LLVM options as -Cllvm-args takes them, e.g. --profile-use-args=-disable-icp",
        )
    return words


def label(options: Sequence[str]) -> str:
    return "PGO " + " ".join(options)


def _slug(options: Sequence[str]) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", " ".join(options)).strip("-")


def pgo_profile(work: Path) -> Path:
    """The stored profile the work dir's PGO build used (``report.json``'s optimise record)."""
    optimised = report.load(work).optimise
    if not isinstance(optimised, OptimiseResult) or not optimised.store_path.is_file():
        raise MissingInput(
            f"--profile-use-args needs the profile of the work dir's PGO build, and {work} has none",
            "run `nox -s pgo` first",
        )
    return optimised.store_path


def _log(plan: BuildPlan, slug: str) -> Path:
    return plan.logs / f"bench-variant-{slug}-build.log"


def variant_c_compilers(plan: BuildPlan, options: Sequence[str], name: str | None = None) -> str:
    """What compiled a variant's C and C++ (:func:`build_variant`'s target dir and log), for the bench table: the
    bench built it, so it is known, not a binary given by path."""
    slug = name or _slug(options)
    return built_c_compilers(plan, plan.workdir.variant_target(slug), _log(plan, slug))


def both_profiles_record(work: Path) -> OptimiseResult:
    """The work dir's optimise record ``--both-profiles`` builds from: refused when there is none, or when the profile
    it read, or the whole one its partial profile came from, is gone."""
    optimised = report.load(work).optimise
    if not isinstance(optimised, OptimiseResult) or not optimised.store_path.is_file():
        raise MissingInput(
            f"--both-profiles needs the profile of the work dir's PGO build, and {work} has none",
            "run `nox -s pgo` first",
        )
    whole = optimised.whole_profile
    if optimised.partial and (whole is None or not whole.is_file()):
        raise MissingInput(
            f"--both-profiles needs the whole profile of the PGO build's partial one, {whole}, and it is gone",
            "run `nox -s pgo` again",
        )
    return optimised


def other_profile(plan: BuildPlan) -> tuple[Path, str]:
    """``--both-profiles``: the store path of the work dir's training's other profile, and its label: the whole one
    when the PGO build read the partial one (PGO_PARTIAL, the default), else the partial one, written here."""
    optimised = both_profiles_record(plan.work)
    if optimised.partial and optimised.whole_profile is not None:
        # into the store as the optimised build's would be, checked against the sha256 optimise recorded
        return plan.store.put(optimised.whole_profile, digest=optimised.whole_profile_sha256), "whole"
    tool = find_profdata(plan.rustc, rustc_sysroot(plan.env), plan.env, plan.config.llvm_profdata)
    log = plan.logs / "bench-partial.log"
    out = plan.workdir.partial_profdata(plan.crate.bin)
    rewritten = profdata.partial(tool, optimised.store_path, out, env=plan.env, log=log)
    return plan.store.put(rewritten.path), "partial"


def build_variant(
    plan: BuildPlan, options: Sequence[str], profile: Path | None = None, name: str | None = None
) -> Path:
    """The work dir's PGO build again with ``-Cllvm-args=<option>`` for each of ``options``, from its profile or
    from ``profile`` (a store path); ``name``: its folder's and log's name (default: the options')."""
    store_path = profile or pgo_profile(plan.work)
    flags = [
        f"-Cprofile-use={store_path}",
        "-Cllvm-args=-pgo-warn-missing-function",
        *(f"-Cllvm-args={o}" for o in options),
        *link_flags(plan),
    ]
    slug = name or _slug(options)
    target_dir = plan.workdir.variant_target(slug)
    say(f"bench: the PGO build {' '.join(options) or 'again'} from {store_path.name} in {target_dir}")
    # the C and C++ of build scripts as the optimised build compiles them (the same compilers, the C profile):
    # the variant differs from the PGO binary by its options alone
    rust_env = env_with_rustflags(plan.env, plan.rustflags, flags)
    env = cflags.c_env(plan.c, rust_env, [f"-fprofile-use={store_path}"], plan.workdir.bin, optimise=True)
    run(
        plan.build_argv(target_dir),
        env=env,
        log=_log(plan, slug),
        cwd=plan.cwd,
        what=f"the PGO build {' '.join(options) or 'from ' + store_path.name}",
    )
    return plan.binary(target_dir)  # one that is not there is refused by the copy (builds.check_executable)
