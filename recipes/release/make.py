"""``nox -s release -- vX.Y.Z``: the plain and the PGO binary of a tag, built so that they can be built again.

On a clean checkout of the tag: the PGO pipeline (instrument, train, merge, optimise) and the plain build
with the same cargo command, target and base flags, both with SOURCE_DATE_EPOCH of the commit and the build
machine's paths remapped; both stripped and packed in deterministic tarballs; the profile, a manifest of
everything the rebuild must match, and SHA256SUMS. All of it goes to ``dist/<tag>/`` at once (a temp dir,
then a rename), or nothing does. A release of several targets (``--target A --target B``, recipes/release/matrix.py)
makes
each target's files so, and writes them all with one SHA256SUMS at the end.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from recipes import report
from recipes.claim import CrateIdentity, claim_each
from recipes.config import Config
from recipes.errors import CheckFailed, ConfigError, EnvironmentRefused
from recipes.files import atomic_output, temporary_name, write_atomically
from recipes.llvm import boltlib, checks, elf
from recipes.plan import BuildPlan, make_plan
from recipes.release import cpu, provenance
from recipes.release import manifest as release_manifest
from recipes.release.manifest import (
    Artefact,
    Artefacts,
    BoltInfo,
    BoltProfile,
    CCode,
    CCrate,
    CpuBaseline,
    Manifest,
    Partial,
    PgoBuild,
    Toolchain,
    Training,
)
from recipes.release.reproducible import (
    SUMS,
    Names,
    binary_tarball,
    cargo_home,
    commit_time,
    dirty_paths,
    git,
    outside_workspace,
    remap_flags,
    remap_pairs,
    remap_roles,
    repo_root,
    reproducible_env,
    sha256_bytes,
    sha256sums_text,
    tag_commit,
    tag_objects,
    without_remap,
)
from recipes.results import BoltResult, MergeResult, OptimiseResult, Report
from recipes.runner import capture, run, say
from recipes.stages.pipeline import pgo
from recipes.stages.plain import plain
from recipes.store import sha256_file
from recipes.toolchain import cflags
from recipes.toolchain.rustc import RustcInfo, cargo_version, find_profdata, rustc_sysroot
from recipes.workload import Workload, workload_path

#: what may have put a build machine's path in a release binary
LEAK_HINT = (
    "something bypasses --remap-path-prefix and -ffile-prefix-map (env!/include_str! of an absolute path, a C string "
    "of one?)"
)


@dataclass(frozen=True)
class ReproduciblePlan:
    """A build plan with SOURCE_DATE_EPOCH and the remap flags, and the flags that do not depend on paths."""

    plan: BuildPlan
    remap: tuple[tuple[str, str], ...]
    portable_rustflags: tuple[str, ...]
    source_date_epoch: int


def reproducible_plan(config: Config, environ: Mapping[str, str], *, source_root: Path, sde: int) -> ReproduciblePlan:
    """``plan.make_plan`` in the reproducible environment, the remap flags put first in the base flags.

    The base flags are worked out before the remap flags are added: otherwise the per-target variable
    would look set by the user and the ``[build] rustflags`` of .cargo/config.toml would not be carried.
    """
    env = reproducible_env(environ, sde)
    # a release's profile is its own training's, or given for this very commit: used as it is, in one build whose
    # flags are the ones its rebuild gives (no first build with LLVM's dumps, PGO_CARRY)
    plan = make_plan(replace(config, carry=False), env)
    refuse_location_dependent_packages(plan)
    portable = tuple(without_remap(plan.rustflags.base))
    pairs = remap_pairs(
        source_root=source_root,
        work=config.out,
        cargo_home=cargo_home(plan.env),
        sysroot=rustc_sysroot(plan.env),
        rustc_commit=plan.rustc.commit_hash,
    )
    flags = replace(plan.rustflags, base=(*remap_flags(pairs), *portable))
    c_plan = replace(plan.c, base_flags=cflags.prefix_map_flags(pairs))  # the C's paths remapped as the Rust's
    return ReproduciblePlan(replace(plan, rustflags=flags, c=c_plan), tuple(pairs), portable, sde)


def refuse_location_dependent_packages(plan: BuildPlan) -> None:
    """Refuse path dependencies outside the workspace root: no build at another path can match theirs."""
    argv = ["cargo", "metadata", "--format-version", "1", "--manifest-path", str(plan.crate.manifest)]
    if plan.config.locked:
        argv.append("--locked")
    outside = outside_workspace(json.loads(capture(argv, env=plan.env, cwd=plan.cwd)))
    if outside:
        raise EnvironmentRefused(
            f"{outside[0]} is a path dependency outside the workspace root: cargo hashes its absolute path into "
            "the crate identity, so a build from another checkout differs and its profile would not match",
            "make it a member of the workspace ([workspace] members) or move it under the workspace root",
        )


def describe_rustc(info: RustcInfo) -> str:
    return f"rustc {info.release} (commit {info.commit_hash[:12]}, LLVM {info.llvm_version}, host {info.host})"


def strip_tool(env: Mapping[str, str]) -> str:
    return env.get("STRIP", "strip")


def strip_version(env: Mapping[str, str]) -> str:
    return capture([strip_tool(env), "--version"], env=env).splitlines()[0].strip()


def strip_binary(binary: Path, dest: Path, env: Mapping[str, str], log: Path, tool: str | None = None) -> Path:
    """A stripped copy of ``binary`` at ``dest`` (the original stays as cargo left it); ``tool``: another strip
    than $STRIP or strip (llvm-strip for a BOLTed binary)."""
    strip = tool or strip_tool(env)
    with atomic_output(dest) as tmp:
        run([strip, "--strip-all", "-o", str(tmp), str(binary)], env=env, log=log, what=Path(strip).name)
    return dest


def workload_of_tree(config: Config, repo: Path) -> Config:
    """A workload given by name is read from the tag's tree (``<repo>/profiles/<name>.toml``) when it is there."""
    if config.workload is None or config.workload.endswith(".toml") or "/" in config.workload:
        return config
    in_tree = workload_path(repo, config.workload)
    return replace(config, workload=str(in_tree)) if in_tree.is_file() else config


def relative_to_repo(path: Path, repo: Path, what: str) -> str:
    try:
        return str(path.resolve().relative_to(repo.resolve()))
    except ValueError as exc:
        raise ConfigError(
            f"{what} {path} is not inside the repository {repo}", "release a crate of this repository"
        ) from exc


def check_new_folder(out_dir: Path) -> None:
    """Refuse, before anything is built, a release folder that cannot be made where it is named: a dangling symbolic
    link, or under one, or under something that is not a directory (a file)."""
    for path in (out_dir, *out_dir.parents):
        if path.is_symlink() and not path.exists():
            raise EnvironmentRefused(
                f"the release folder {out_dir} is {'' if path == out_dir else f'under {path}, '}a dangling symbolic "
                f"link (to {path.readlink()})",
                "remove the link, or give --artefacts a folder that does not exist yet",
            )
        if path.exists():
            if path != out_dir and not path.is_dir():
                raise EnvironmentRefused(
                    f"the release folder {out_dir} cannot be made: {path} is not a directory",
                    "give --artefacts a folder under a directory",
                )
            return


def refuse_c_choice(config: Config) -> None:
    """A ``PGO_C`` list of packages or a ``PGO_CXX`` setting is refused before anything is built: the manifest
    records whether the C was profiled, not for which packages or languages, and the rebuild could not compile the
    C as the release did."""
    chosen = [
        f"{config.source(key)}={','.join(value) if isinstance(value, tuple) else int(value)}"
        for key, value in (("c", config.c), ("cxx", config.cxx))
        if isinstance(value, tuple) or (key == "cxx" and value is not None)
    ]
    if chosen:
        raise ConfigError(
            f"{' and '.join(chosen)}: a release profiles the C and C++ of build scripts all alike or not at all "
            "(its manifest and rebuild know no list of packages and no C++ apart)",
            "release with PGO_C=1 or PGO_C=0 and without PGO_CXX",
        )


def refuse_inside_release_folder(config: Config, out_dir: Path) -> None:
    """Refuse, before anything is built, a work dir or a profile store that is the release folder or inside it:
    the release folder is made new, of the release's files alone."""
    folder = out_dir.resolve()
    named = (("PGO_OUT", config.out), ("PGO_PROFILE_STORE", config.store))
    for variable, path in named:
        if path is not None and (path.resolve() == folder or folder in path.resolve().parents):
            said = (
                f"{variable}={path} is the release folder {out_dir}"
                if path.resolve() == folder
                else f"{variable}={path} is inside the release folder {out_dir}"
            )
            raise EnvironmentRefused(said, f"give {variable} a folder outside it, or give --artefacts another folder")


def refuse_release_folder_inside(configs: Sequence[Config], out_dir: Path) -> None:
    """Refuse, before anything is built, a release folder inside the work dir (``PGO_OUT``, which holds every
    target's) or inside a profile store: the stages write and empty the work dir's folders (``release/<tag>`` is the
    stripped binaries', ``profraw`` the training's), so the release was built whole and then not written (OSError:
    Directory not empty), and a store holds the pipeline's profiles alone."""
    folder = out_dir.resolve()
    work = configs[0].out.parent if len(configs) > 1 else configs[0].out
    named = [("PGO_OUT", work), *(("PGO_PROFILE_STORE", c.store) for c in configs if c.store is not None)]
    for variable, path in named:
        if path.resolve() in folder.parents:
            raise EnvironmentRefused(
                f"the release folder {out_dir} is inside {variable}={path}, whose folders the pipeline writes and "
                "empties",
                f"give --artefacts a folder outside it, or give {variable} another folder",
            )


def check_release_checkout(repo: Path, tag: str, env: Mapping[str, str]) -> str:
    """The tag's commit, if the tag names it (not another tag), HEAD is that commit and nothing is modified or
    untracked; else a refusal."""
    commit = tag_commit(repo, tag, env)
    others = [name for name in tag_objects(repo, tag, env) if name != tag]
    if others:
        raise EnvironmentRefused(
            f"tag {tag} is a tag of the tag {others[0]} (its object is {others[0]}'s tag object, not a commit): a "
            "release's tag names its commit",
            f"tag the commit itself: git tag -f -a {tag} -m {tag} {others[0]}^{{commit}}",
        )
    head = git(repo, "rev-parse", "HEAD", env=env)
    if head != commit:
        raise EnvironmentRefused(
            f"HEAD is {head[:12]}, not {tag} ({commit[:12]})", f"release from a clean checkout: git checkout {tag}"
        )
    dirty = dirty_paths(repo, env)
    if dirty:
        raise EnvironmentRefused(
            f"the worktree of {repo} is dirty: {len(dirty)} changed or untracked paths (first: {dirty[0]})",
            "a release is built from the tag alone: commit or remove the changes, or use a clean clone",
        )
    return commit


def leaked_paths(data: bytes, pairs: tuple[tuple[str, str], ...]) -> list[str]:
    """The build machine's paths (the remapped ones) that are still in a binary.

    The neutral paths are taken out first (``/build/src`` holds ``/src``), and a path of one component
    (``/usr`` as a distribution's sysroot) is too common a string to be evidence of anything.
    """
    cleaned = data
    for neutral in sorted({dest for _, dest in pairs}, key=len, reverse=True):
        cleaned = cleaned.replace(neutral.encode(), b"")
    return [src for src, _ in pairs if src.rstrip("/").count("/") >= 2 and src.encode() in cleaned]


def c_code_manifest(plan: BuildPlan, optimised: OptimiseResult) -> CCode:
    """What the rebuild must do with the target's C: ``profiled`` (the C of at least one crate compiled by clang
    with the profile), that clang's ``--version`` line, the crates that compiled C and their compilers."""
    crates = optimised.c_code["crates"] if optimised.c_code else []
    profiled = plan.c.enabled and any(c["profile_flags"] for c in crates)
    return CCode(
        profiled=profiled,
        clang=plan.c.clang_line() if profiled else None,
        crates=tuple(CCrate(c["crate"], tuple(c["compilers"])) for c in crates),
    )


def baseline_cpu_args(workload: Workload | None) -> list[str] | None:
    """How the baseline-CPU check runs a release binary: a server (None) is started and asked over HTTP;
    a command-line tool is run with the arguments of its workload's first command phase."""
    if workload is None or workload.instances[0].mode != "command":
        return None
    return list(getattr(workload.instances[0].phases[0], "args", []))


@dataclass(frozen=True)
class Checkout:
    """The clean checkout of the tag a release is built from, and the new folder its files go to."""

    repo: Path
    commit: str
    manifest_rel: str
    out_dir: Path
    source_date_epoch: int


def check_checkout(tag: str, config: Config, environ: Mapping[str, str], artefacts: Path | None) -> Checkout:
    """What is refused before anything is built: not the tag's clean checkout, a release folder that exists or
    cannot be made."""
    repo = repo_root(config.manifest.parent, environ)
    commit = check_release_checkout(repo, tag, environ)
    manifest_rel = relative_to_repo(config.manifest, repo, "the manifest")
    out_dir = (artefacts or repo / "dist" / tag).absolute()
    check_new_folder(out_dir)
    if out_dir.exists():
        raise EnvironmentRefused(f"{out_dir} already exists", "a release is written once: remove it to build again")
    return Checkout(repo, commit, manifest_rel, out_dir, commit_time(repo, commit, environ))


def release_targets(
    tag: str, configs: Sequence[Config], environ: Mapping[str, str], artefacts: Path | None = None
) -> list[tuple[Manifest, Path]]:
    """The release of ``tag`` for each configuration's target (its own pipeline, checks, manifest and statements),
    all their files and one SHA256SUMS written at once, or nothing; returns the manifests and the folder."""
    for config in configs:
        refuse_c_choice(config)
    checkout = check_checkout(tag, configs[0], environ, artefacts)
    for config in configs:
        refuse_inside_release_folder(config, checkout.out_dir)
    refuse_release_folder_inside(configs, checkout.out_dir)
    say(f"release: {tag} = {checkout.commit[:12]} of {checkout.repo}, SOURCE_DATE_EPOCH={checkout.source_date_epoch}")
    # every target planned (and so checked) before any is built
    rplans = [
        reproducible_plan(
            workload_of_tree(config, checkout.repo), environ, source_root=checkout.repo, sde=checkout.source_date_epoch
        )
        for config in configs
    ]
    built: dict[str, TargetRelease] = {}
    works = [rplan.plan.work for rplan in rplans]
    # several targets: PGO_OUT holds their work dirs, and is held (and marked) as theirs too
    outer = [works[0].parent] if len(works) > 1 else []
    with claim_each([*outer, *works], "release") as held:
        for one, rplan in zip(held[len(outer) :], rplans, strict=True):
            one.identify(CrateIdentity.of(rplan.plan.crate, rplan.plan.target, rplan.plan.config.features))
        for rplan in rplans:
            if len(rplans) > 1:
                say(f"release: the target {rplan.plan.target}, work dir {rplan.plan.work}")
            built[rplan.plan.triple] = build_target(tag, rplan, checkout)
    files = join_files({triple: target.files for triple, target in built.items()})
    files[SUMS] = sha256sums_text({name: sha256_bytes(data) for name, data in files.items()}).encode()
    write_dir(checkout.out_dir, files)
    say(f"release: {len(files)} files in {checkout.out_dir}")
    return [(target.manifest, checkout.out_dir) for target in built.values()]


def join_files(groups: Mapping[str, Mapping[str, bytes]]) -> dict[str, bytes]:
    """The files of several targets (or folders), ``{label: {name: bytes}}``, in one folder: a name in two is
    refused naming both."""
    joined: dict[str, bytes] = {}
    owner: dict[str, str] = {}
    for label, files in groups.items():
        for name, data in files.items():
            if name in owner:
                raise CheckFailed(
                    f"{name} is in both {owner[name]} and {label}",
                    "a release has one file of each name: gather each target's folder once",
                )
            joined[name], owner[name] = data, label
    return joined


@dataclass(frozen=True)
class TargetRelease:
    """One target's release: its manifest and its files (SHA256SUMS is the folder's, written over all targets)."""

    manifest: Manifest
    files: dict[str, bytes]


@dataclass(frozen=True)
class TargetBuilds:
    """What the pipeline and the plain build of one target leave: report.json's records (the optimise stage's
    holds the PGO binary, the copy it checked, and the profile in the store), the plain binary as cargo left it."""

    full: Report
    optimised: OptimiseResult
    plain_binary: Path


@dataclass(frozen=True)
class CheckedBinaries:
    """The two stripped binaries, checked: one libc, the PGO one's glibc ceiling, the baseline CPU (run with
    ``run``: None for a server), no build machine's path; their bytes."""

    plain: Path
    pgo: Path
    plain_bytes: bytes
    pgo_bytes: bytes
    libc: str
    glibc: str | None
    cpu: str
    run: list[str] | None


@dataclass(frozen=True)
class Packed:
    """The release's tarballs and its profile (checked unchanged since the build), as they are published."""

    plain_tar: bytes
    pgo_tar: bytes
    profile: bytes


def build_target(tag: str, rplan: ReproduciblePlan, checkout: Checkout) -> TargetRelease:
    """The pipeline, the plain build and every check of one target; its artefacts, manifest and statements."""
    names = Names(rplan.plan.crate.bin, tag, rplan.plan.triple)
    builds = build_pgo_and_plain(rplan)
    stripped_dir = rplan.plan.workdir.release(tag)
    checked = check_binaries(rplan, strip_both(rplan.plan, builds, names, stripped_dir))
    packed = pack(builds, checked, names, rplan.source_date_epoch)
    bolted = (
        _bolt_artefact(rplan, report.require(rplan.plan.work, "bolt", "the release"), names, stripped_dir, checked)
        if rplan.plan.config.bolt
        else None
    )
    manifest = release_manifest_of(tag, rplan, checkout, builds, checked, packed, names, bolted)
    files = {
        names.plain_tarball: packed.plain_tar,
        names.pgo_tarball: packed.pgo_tar,
        names.profile: packed.profile,
        names.manifest: release_manifest.encode(manifest),
        **(bolted.files if bolted is not None else {}),
    }
    files.update(provenance.release_statements(manifest, files, checkout.repo, builds.optimised.zigbuild))
    return TargetRelease(manifest, files)


def build_pgo_and_plain(rplan: ReproduciblePlan) -> TargetBuilds:
    """The PGO pipeline, then the plain build; refused when the two disagree on the crate identity."""
    plan = rplan.plan
    pgo(plan)
    full = report.load(plan.work)
    optimised = report.require(plan.work, "optimise", "the release")
    pgo_binary = optimised.binary  # the copy that was checked
    # the plain stage (recorded as ``plain``) in the reproducible plan: its rustflags and C flags remapped as the PGO
    # build's, the package cleaned first
    _, plain_built = plain(
        plan,
        log=plan.logs / "plain-build.log",
        announce=f"release: the plain build of {plan.crate.bin} in {plan.workdir.plain_target}",
        clean_log=plan.logs / "plain-clean.log",
    )
    plain_binary = plain_built.binary
    if plain_built.crate_metadata != optimised.crate_metadata:
        raise CheckFailed(
            f"the plain and the PGO build disagree on the crate identity: {plain_built.crate_metadata} and "
            f"{optimised.crate_metadata}",
            "both must be the same build but for the profile: see plain-build.log and optimise-build.log",
        )
    checks.check_not_plain(
        pgo_binary, optimised.binary_sha256, plain_binary, sha256_file(plain_binary), plan.workdir.observed("optimise")
    )
    return TargetBuilds(full, optimised, plain_binary)


def strip_both(plan: BuildPlan, builds: TargetBuilds, names: Names, stripped_dir: Path) -> tuple[Path, Path]:
    """Stripped copies of the plain and the PGO binary under ``stripped_dir`` (``plain/``, ``pgo/``)."""
    plain = strip_binary(
        builds.plain_binary, stripped_dir / "plain" / names.bin, plan.env, plan.logs / "strip-plain.log"
    )
    pgo = strip_binary(builds.optimised.binary, stripped_dir / "pgo" / names.bin, plan.env, plan.logs / "strip-pgo.log")
    return plain, pgo


def check_binaries(rplan: ReproduciblePlan, stripped: tuple[Path, Path]) -> CheckedBinaries:
    """The stripped plain and PGO binary checked: one libc (the PGO artefact starts wherever the plain one does),
    the baseline CPU, no path of the build machine left in either."""
    plan = rplan.plan
    plain, pgo = stripped
    elf.check_no_instrumentation(pgo, "the release's PGO binary")  # as shipped: stripped, its sections kept
    libc = elf.check_same_libc(plain, pgo)
    glibc = elf.max_glibc(pgo)  # None for a static binary (musl): it needs no glibc
    say(f"release: the plain and the PGO binary are both {libc}")
    baseline_args = baseline_cpu_args(plan.workload)
    checked = {
        label: cpu.check_binary(binary, plan.workdir.cpu_baseline(label), plan.env, args=baseline_args)
        for label, binary in (("plain", plain), ("pgo", pgo))
    }
    plain_bytes, pgo_bytes = plain.read_bytes(), pgo.read_bytes()
    for label, data in (("plain", plain_bytes), ("PGO", pgo_bytes)):
        refuse_leaked_paths(data, rplan.remap, f"the {label} binary")
    return CheckedBinaries(plain, pgo, plain_bytes, pgo_bytes, libc, glibc, checked["pgo"].cpu, baseline_args)


def refuse_leaked_paths(data: bytes, pairs: tuple[tuple[str, str], ...], what: str) -> None:
    """Refuse a binary (``what``) that still holds a path of the build machine."""
    leaked = leaked_paths(data, pairs)
    if leaked:
        raise CheckFailed(f"{what} still contains the build machine's path {leaked[0]}", LEAK_HINT)


def pack(builds: TargetBuilds, checked: CheckedBinaries, names: Names, sde: int) -> Packed:
    """The two binaries in their deterministic tarballs, and the profile, refused if it changed after the build."""
    profile = builds.optimised.store_path.read_bytes()
    if sha256_bytes(profile) != builds.optimised.profile_sha256:
        raise CheckFailed(f"{builds.optimised.store_path} changed after the build", "run the release again")
    return Packed(
        plain_tar=binary_tarball(names.bin, checked.plain_bytes, names.plain_top, sde),
        pgo_tar=binary_tarball(names.bin, checked.pgo_bytes, names.pgo_top, sde),
        profile=profile,
    )


def release_manifest_of(
    tag: str,
    rplan: ReproduciblePlan,
    checkout: Checkout,
    builds: TargetBuilds,
    checked: CheckedBinaries,
    packed: Packed,
    names: Names,
    bolted: BoltArtefact | None,
) -> Manifest:
    """The manifest of one target's release: everything its rebuild must match."""
    plan, repo, sde, workload = rplan.plan, checkout.repo, checkout.source_date_epoch, rplan.plan.workload
    return Manifest(
        schema=release_manifest.MANIFEST_SCHEMA,
        tag=tag,
        commit=checkout.commit,
        commit_time=sde,
        source_date_epoch=sde,
        manifest_path=checkout.manifest_rel,
        package=plan.crate.package,
        bin=plan.crate.bin,
        features=tuple(plan.config.features),
        locked=plan.config.locked,
        workload=relative_to_repo(workload.path, repo, "the workload") if workload else None,
        workload_sha256=sha256_file(workload.path) if workload else None,
        target=plan.target,
        triple=plan.triple,
        toolchain=toolchain_of(plan),
        c_code=c_code_manifest(plan, builds.optimised),
        cargo_command=tuple(plan.config.cargo),
        # the repository's path made relative (``--manifest-path hello/Cargo.toml``)
        cargo_argv=tuple(a.removeprefix(f"{repo.resolve()}/") for a in plan.build_argv(None)),
        rustflags_var=plan.rustflags.var,
        rustflags=rplan.portable_rustflags,
        remap_path_prefix=remap_roles(plan.rustc.commit_hash),  # not this machine's paths: the same from any checkout
        profile_store_path=str(builds.optimised.store_path),
        profile_sha256=builds.optimised.profile_sha256,
        training=training_of(builds.full, plan),
        pgo_build=PgoBuild(
            missing_profile_functions=builds.optimised.missing_profile_functions,
            stale_profile_warnings=builds.optimised.stale_profile_warnings,
            crate_metadata=dict(builds.optimised.crate_metadata),
            max_glibc=builds.optimised.max_glibc,
        ),
        max_glibc=checked.glibc,
        libc=checked.libc,
        cpu_baseline=CpuBaseline(
            checked.cpu, None if checked.run is None else tuple(checked.run), plain="passed", pgo="passed"
        ),
        artefacts=artefacts_of(names, checked, packed, bolted),
        bolt=bolted.info if bolted is not None else None,
        partial=partial_of(builds.optimised),
    )


def partial_of(optimised: OptimiseResult) -> Partial | None:
    """What the manifest records of a build from a partial profile (None: it read the whole one)."""
    if not optimised.partial or optimised.whole_profile_sha256 is None:
        return None
    return Partial(optimised.whole_profile_sha256, optimised.never_run_records or 0, optimised.never_run_functions or 0)


def toolchain_of(plan: BuildPlan) -> Toolchain:
    """rustc, cargo, llvm-profdata and strip as the manifest records them."""
    tool = find_profdata(plan.rustc, rustc_sysroot(plan.env), plan.env, plan.config.llvm_profdata)
    return Toolchain(
        rustc_vv=capture([plan.env.get("RUSTC", "rustc"), "-vV"], env=plan.env),
        rustc=describe_rustc(plan.rustc),
        cargo=cargo_version(plan.env, plan.cwd),
        llvm_profdata=f"LLVM {tool.llvm_version} ({tool.path})",
        strip=strip_version(plan.env),
    )


def training_of(full: Report, plan: BuildPlan) -> Training | None:
    """What the training covered (the merge's record), None for a release from a given profile (PGO_PROFDATA)."""
    merged = full.merge
    if not isinstance(merged, MergeResult) or plan.config.profdata is not None:
        return None
    return Training(merged.executed_functions, merged.total_functions)


def artefacts_of(names: Names, checked: CheckedBinaries, packed: Packed, bolted: BoltArtefact | None) -> Artefacts:
    """The manifest's artefacts: each file by name and sha256, a tarball with the binary in it."""
    return Artefacts(
        plain=packed_artefact(names, "plain", packed.plain_tar, checked.plain_bytes),
        pgo=packed_artefact(names, "pgo", packed.pgo_tar, checked.pgo_bytes),
        profile=Artefact(names.profile, sha256_bytes(packed.profile)),
        pgo_bolt=bolted.pgo_bolt if bolted is not None else None,
        bolt_profile=bolted.bolt_profile if bolted is not None else None,
    )


def packed_artefact(names: Names, kind: str, tarball: bytes, binary: bytes) -> Artefact:
    """The manifest's entry of a tarball of ``kind``: its name and sha256, the binary's path in it and sha256."""
    file, top = names.artefact(kind)
    return Artefact(file, sha256_bytes(tarball), f"{top}/{names.bin}", sha256_bytes(binary))


@dataclass(frozen=True)
class BoltArtefact:
    """The PGO+BOLT artefact of a release: what the manifest records, its artefacts' entries and its files."""

    info: BoltInfo
    pgo_bolt: Artefact
    bolt_profile: Artefact
    files: dict[str, bytes]


def _bolt_artefact(
    rplan: ReproduciblePlan,
    bolted: BoltResult,
    names: Names,
    stripped_dir: Path,
    checked: CheckedBinaries,
) -> BoltArtefact:
    """The BOLTed binary stripped by llvm-strip (GNU strip breaks it), checked as the PGO one is (libc, baseline
    CPU, no build path), packed; the BOLT profile beside it."""
    plan = rplan.plan
    binary = bolted.binary
    if sha256_file(binary) != bolted.binary_sha256:
        raise CheckFailed(f"{binary} changed after the bolt stage checked it", "run the release again")
    llvm_strip = boltlib.find_llvm_strip(plan.rustc, plan.env)
    stripped = strip_binary(
        binary, stripped_dir / "pgo-bolt" / names.bin, plan.env, plan.logs / "strip-pgo-bolt.log", str(llvm_strip)
    )
    elf.check_same_libc(checked.plain, stripped)
    cpu.check_binary(stripped, plan.workdir.cpu_baseline("pgo-bolt"), plan.env, args=checked.run)
    data = stripped.read_bytes()
    refuse_leaked_paths(data, rplan.remap, "the PGO+BOLT binary")
    store_path = bolted.store_path
    profile = store_path.read_bytes()
    if sha256_bytes(profile) != bolted.profile_sha256:
        raise CheckFailed(f"{store_path} changed after llvm-bolt used it", "run the release again")
    tarball = binary_tarball(names.bin, data, names.pgo_bolt_top, rplan.source_date_epoch)
    return BoltArtefact(
        info=bolt_info(bolted, llvm_strip, plan.env),
        pgo_bolt=packed_artefact(names, "pgo_bolt", tarball, data),
        bolt_profile=Artefact(names.bolt_profile, bolted.profile_sha256),
        files={names.pgo_bolt_tarball: tarball, names.bolt_profile: profile},
    )


def bolt_info(bolted: BoltResult, llvm_strip: Path, env: Mapping[str, str]) -> BoltInfo:
    """What the manifest records of the bolt stage: the BOLT profile, llvm-bolt and llvm-strip, the arguments."""
    return BoltInfo(
        profile_store_path=str(bolted.store_path),
        profile_sha256=bolted.profile_sha256,
        llvm_bolt=f"LLVM {bolted.llvm_bolt_version} ({bolted.llvm_bolt})",
        llvm_strip=f"LLVM {boltlib.tool_version(llvm_strip, 'llvm-strip', env=env)} ({llvm_strip})",
        bolt_args=tuple(bolted.bolt_args),
        emit_relocs=True,
        profile=BoltProfile(
            functions_with_profile=bolted.functions_with_profile,
            total_functions=bolted.total_functions,
            profile_branches=bolted.profile_branches,
            profile_functions=bolted.profile_functions,
        ),
    )


def write_dir(out_dir: Path, files: Mapping[str, bytes]) -> None:
    """All the files (a name may be a path in it: an image layout's ``blobs/sha256/<hex>``) in a new directory at
    once: written in a temp dir next to it, then renamed."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = temporary_name(out_dir)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        for name, data in sorted(files.items()):
            write_atomically(staging / name, data)
        os.replace(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def summary_lines(manifest: Manifest, out_dir: Path) -> list[str]:
    artefacts, c_code = manifest.artefacts, manifest.c_code
    # plain, pgo, profile (and pgo_bolt, bolt_profile): a tarball by the sha256 of its binary, a profile by its own
    files = [one for kind in artefacts.kinds() if (one := artefacts.get(kind)) is not None]
    return [
        f"release {manifest.tag} ({manifest.commit[:12]}) in {out_dir}",
        *(
            f"  {a.file}  binary sha256 {a.binary_sha256}" if a.binary else f"  {a.file}  sha256 {a.sha256}"
            for a in files
        ),
        f"  {manifest.toolchain.rustc}; {manifest.toolchain.cargo}",
        f"  {manifest.target}: both binaries {manifest.libc}",
        *(
            [f"  the C of {', '.join(c.crate for c in c_code.crates)}: profiled, by {c_code.clang}"]
            if c_code is not None and c_code.profiled
            else []
        ),
    ]
