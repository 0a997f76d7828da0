"""``nox -s release -- vX.Y.Z``: the plain and the PGO binary of a tag, built so that they can be built again.

On a clean checkout of the tag: the PGO pipeline (instrument, train, merge, optimise) and the plain build
with the same cargo command, target and base flags, both with SOURCE_DATE_EPOCH of the commit and the build
machine's paths remapped; both stripped and packed in deterministic tarballs; the profile, a manifest of
everything the rebuild must match, and SHA256SUMS. All of it goes to ``dist/<tag>/`` at once (a temp dir,
then a rename), or nothing does. A release of several targets (``--target A --target B``, recipes/matrix.py) makes
each target's files so, and writes them all with one SHA256SUMS at the end.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from recipes import bolt as boltlib
from recipes import cflags, cpu, elf, provenance, report, stages
from recipes.config import Config
from recipes.errors import CheckFailed, ConfigError, EnvironmentRefused
from recipes.files import atomic_output, write_atomically
from recipes.plan import BuildPlan, make_plan
from recipes.reproducible import (
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
    repo_root,
    reproducible_env,
    sha256_bytes,
    sha256sums_text,
    tag_commit,
    without_remap,
)
from recipes.results import BoltResult, MergeResult, OptimiseResult
from recipes.runner import capture, run, say
from recipes.store import sha256_file
from recipes.toolchain import RustcInfo, cargo_version, find_profdata, rustc_sysroot
from recipes.workload import Workload, workload_path

MANIFEST_SCHEMA = provenance.MANIFEST_SCHEMA
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
    plan = make_plan(config, env)
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


def check_release_checkout(repo: Path, tag: str, env: Mapping[str, str]) -> str:
    """The tag's commit, if HEAD is that commit and nothing is modified or untracked; else a refusal."""
    commit = tag_commit(repo, tag, env)
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


def plain_build(rplan: ReproduciblePlan) -> tuple[Path, dict[str, str]]:
    """The plain build (:func:`recipes.stages.plain.plain`) in the reproducible plan: its rustflags and C flags
    remapped as the PGO build's, the package cleaned first; the binary and its crate identities."""
    plan = rplan.plan
    target_dir = plan.work / "plain-target"
    built = stages.plain(
        plan,
        target_dir,
        log=plan.logs / "plain-build.log",
        announce=f"release: the plain build of {plan.crate.bin} in {target_dir}",
        clean_log=plan.logs / "plain-clean.log",
    )
    return built.binary, built.crate_metadata


def leaked_paths(data: bytes, pairs: tuple[tuple[str, str], ...]) -> list[str]:
    """The build machine's paths (the remapped ones) that are still in a binary.

    The neutral paths are taken out first (``/build/src`` holds ``/src``), and a path of one component
    (``/usr`` as a distribution's sysroot) is too common a string to be evidence of anything.
    """
    cleaned = data
    for neutral in sorted({dest for _, dest in pairs}, key=len, reverse=True):
        cleaned = cleaned.replace(neutral.encode(), b"")
    return [src for src, _ in pairs if src.rstrip("/").count("/") >= 2 and src.encode() in cleaned]


def c_code_manifest(plan: BuildPlan, optimised: OptimiseResult) -> dict[str, Any]:
    """What the rebuild must do with the target's C: ``profiled`` (the C of at least one crate compiled by clang
    with the profile), that clang's ``--version`` line, the crates that compiled C and their compilers."""
    crates = optimised.c_code["crates"] if optimised.c_code else []
    profiled = plan.c.enabled and any(c["profile_flags"] for c in crates)
    return {
        "profiled": profiled,
        "clang": plan.c.clang_line() if profiled else None,
        "crates": [{"crate": c["crate"], "compilers": list(c["compilers"])} for c in crates],
    }


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
) -> list[dict[str, Any]]:
    """The release of ``tag`` for each configuration's target (its own pipeline, checks, manifest and statements),
    all their files and one SHA256SUMS written at once, or nothing; returns the manifests."""
    checkout = check_checkout(tag, configs[0], environ, artefacts)
    say(f"release: {tag} = {checkout.commit[:12]} of {checkout.repo}, SOURCE_DATE_EPOCH={checkout.source_date_epoch}")
    # every target planned (and so checked) before any is built
    rplans = [
        reproducible_plan(
            workload_of_tree(config, checkout.repo), environ, source_root=checkout.repo, sde=checkout.source_date_epoch
        )
        for config in configs
    ]
    built: dict[str, TargetRelease] = {}
    for rplan in rplans:
        if len(rplans) > 1:
            say(f"release: the target {rplan.plan.target}, work dir {rplan.plan.work}")
        built[rplan.plan.triple] = build_target(tag, rplan, checkout)
    files = join_files({triple: target.files for triple, target in built.items()})
    files[SUMS] = sha256sums_text({name: sha256_bytes(data) for name, data in files.items()}).encode()
    write_dir(checkout.out_dir, files)
    say(f"release: {len(files)} files in {checkout.out_dir}")
    return [{**target.manifest, "artefacts_dir": str(checkout.out_dir)} for target in built.values()]


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

    manifest: dict[str, Any]
    files: dict[str, bytes]


def build_target(tag: str, rplan: ReproduciblePlan, checkout: Checkout) -> TargetRelease:
    """The pipeline, the plain build and every check of one target; its artefacts, manifest and statements."""
    repo, commit, manifest_rel, sde = checkout.repo, checkout.commit, checkout.manifest_rel, checkout.source_date_epoch
    plan = rplan.plan
    names = Names(plan.crate.bin, tag, plan.triple)

    stages.pgo(plan)
    full = report.load(plan.work)
    optimised = report.require(plan.work, "optimise", "the release")
    store_path = optimised.store_path
    pgo_binary = optimised.binary  # the copy that was checked
    plain_binary, plain_identity = plain_build(rplan)
    if plain_identity != optimised.crate_metadata:
        raise CheckFailed(
            f"the plain and the PGO build disagree on the crate identity: {plain_identity} and "
            f"{optimised.crate_metadata}",
            "both must be the same build but for the profile: see plain-build.log and optimise-build.log",
        )

    stripped_dir = plan.work / "release" / tag
    plain_stripped = strip_binary(
        plain_binary, stripped_dir / "plain" / names.bin, plan.env, plan.logs / "strip-plain.log"
    )
    pgo_stripped = strip_binary(pgo_binary, stripped_dir / "pgo" / names.bin, plan.env, plan.logs / "strip-pgo.log")
    libc = elf.check_same_libc(plain_stripped, pgo_stripped)  # the PGO artefact starts wherever the plain one does
    glibc = elf.max_glibc(pgo_stripped)  # None for a static binary (musl): it needs no glibc
    say(f"release: the plain and the PGO binary are both {libc}")
    workload = plan.workload
    baseline_args = baseline_cpu_args(workload)
    checked = {
        label: cpu.check_binary(stripped, plan.work / "cpu-baseline" / label, plan.env, args=baseline_args)
        for label, stripped in (("plain", plain_stripped), ("pgo", pgo_stripped))
    }
    plain_bytes, pgo_bytes = plain_stripped.read_bytes(), pgo_stripped.read_bytes()
    for label, data in (("plain", plain_bytes), ("PGO", pgo_bytes)):
        leaked = leaked_paths(data, rplan.remap)
        if leaked:
            raise CheckFailed(
                f"the {label} binary still contains the build machine's path {leaked[0]}",
                LEAK_HINT,
            )
    profile_bytes = store_path.read_bytes()
    profile_sha = sha256_bytes(profile_bytes)
    if profile_sha != optimised.profile_sha256:
        raise CheckFailed(f"{store_path} changed after the build", "run the release again")

    bolted = (
        _bolt_artefact(
            rplan, report.require(plan.work, "bolt", "the release"), names, stripped_dir, plain_stripped, baseline_args
        )
        if plan.config.bolt
        else None
    )

    plain_tar = binary_tarball(names.bin, plain_bytes, names.plain_top, sde)
    pgo_tar = binary_tarball(names.bin, pgo_bytes, names.pgo_top, sde)
    tool = find_profdata(plan.rustc, rustc_sysroot(plan.env), plan.env, plan.config.llvm_profdata)
    manifest: dict[str, Any] = {
        "schema": MANIFEST_SCHEMA,
        "tag": tag,
        "commit": commit,
        "commit_time": sde,
        "source_date_epoch": sde,
        "manifest_path": manifest_rel,
        "package": plan.crate.package,
        "bin": plan.crate.bin,
        "features": list(plan.config.features),
        "locked": plan.config.locked,
        "workload": relative_to_repo(workload.path, repo, "the workload") if workload else None,
        "workload_sha256": sha256_file(workload.path) if workload else None,
        "target": plan.target,
        "triple": plan.triple,
        "toolchain": {
            "rustc_vV": capture([plan.env.get("RUSTC", "rustc"), "-vV"], env=plan.env),
            "rustc": describe_rustc(plan.rustc),
            "cargo": cargo_version(plan.env),
            "llvm_profdata": f"LLVM {tool.llvm_version} ({tool.path})",
            "strip": strip_version(plan.env),
        },
        "c_code": c_code_manifest(plan, optimised),
        "cargo_command": list(plan.config.cargo),
        "cargo_argv": [_portable_arg(a, repo) for a in plan.build_argv(None)],
        "rustflags_var": plan.rustflags.var,
        "rustflags": list(rplan.portable_rustflags),
        "remap_path_prefix": [list(pair) for pair in rplan.remap],
        "profile_store_path": str(store_path),
        "profile_sha256": profile_sha,
        "training": {"executed_functions": merged.executed_functions, "total_functions": merged.total_functions}
        if isinstance(merged := full.merge, MergeResult) and plan.config.profdata is None
        else None,
        "pgo_build": {
            "missing_profile_functions": optimised.missing_profile_functions,
            "stale_profile_warnings": optimised.stale_profile_warnings,
            "crate_metadata": optimised.crate_metadata,
            "max_glibc": optimised.max_glibc,
        },
        "max_glibc": glibc,
        "libc": libc,
        "cpu_baseline": {"cpu": checked["pgo"].cpu, "run": baseline_args, "plain": "passed", "pgo": "passed"},
        "artefacts": {
            "plain": {
                "file": names.plain_tarball,
                "sha256": sha256_bytes(plain_tar),
                "binary": f"{names.plain_top}/{names.bin}",
                "binary_sha256": sha256_bytes(plain_bytes),
            },
            "pgo": {
                "file": names.pgo_tarball,
                "sha256": sha256_bytes(pgo_tar),
                "binary": f"{names.pgo_top}/{names.bin}",
                "binary_sha256": sha256_bytes(pgo_bytes),
            },
            "profile": {"file": names.profile, "sha256": profile_sha},
        },
    }
    if bolted is not None:
        manifest["bolt"] = bolted.manifest
        manifest["artefacts"].update(bolted.artefacts)
    manifest_bytes = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    files = {
        names.plain_tarball: plain_tar,
        names.pgo_tarball: pgo_tar,
        names.profile: profile_bytes,
        names.manifest: manifest_bytes,
        **(bolted.files if bolted is not None else {}),
    }
    files.update(provenance.release_statements(manifest, files, repo, optimised.zigbuild))
    return TargetRelease(manifest, files)


@dataclass(frozen=True)
class BoltArtefact:
    """The PGO+BOLT artefact of a release: what the manifest records, its artefacts' entries and its files."""

    manifest: dict[str, Any]
    artefacts: dict[str, Any]
    files: dict[str, bytes]


def _bolt_artefact(
    rplan: ReproduciblePlan,
    bolted: BoltResult,
    names: Names,
    stripped_dir: Path,
    plain_stripped: Path,
    baseline_args: list[str] | None,
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
    elf.check_same_libc(plain_stripped, stripped)
    cpu.check_binary(stripped, plan.work / "cpu-baseline" / "pgo-bolt", plan.env, args=baseline_args)
    data = stripped.read_bytes()
    leaked = leaked_paths(data, rplan.remap)
    if leaked:
        raise CheckFailed(
            f"the PGO+BOLT binary still contains the build machine's path {leaked[0]}",
            LEAK_HINT,
        )
    store_path = bolted.store_path
    profile = store_path.read_bytes()
    if sha256_bytes(profile) != bolted.profile_sha256:
        raise CheckFailed(f"{store_path} changed after llvm-bolt used it", "run the release again")
    tarball = binary_tarball(names.bin, data, names.pgo_bolt_top, rplan.source_date_epoch)
    return BoltArtefact(
        manifest={
            "profile_store_path": str(store_path),
            "profile_sha256": bolted.profile_sha256,
            "llvm_bolt": f"LLVM {bolted.llvm_bolt_version} ({bolted.llvm_bolt})",
            "llvm_strip": f"LLVM {boltlib.tool_version(llvm_strip, 'llvm-strip', env=plan.env)} ({llvm_strip})",
            "bolt_args": list(bolted.bolt_args),
            "emit_relocs": True,
            "profile": {
                "functions_with_profile": bolted.functions_with_profile,
                "total_functions": bolted.total_functions,
                "profile_branches": bolted.profile_branches,
                "profile_functions": bolted.profile_functions,
            },
        },
        artefacts={
            "pgo_bolt": {
                "file": names.pgo_bolt_tarball,
                "sha256": sha256_bytes(tarball),
                "binary": f"{names.pgo_bolt_top}/{names.bin}",
                "binary_sha256": sha256_bytes(data),
            },
            "bolt_profile": {"file": names.bolt_profile, "sha256": bolted.profile_sha256},
        },
        files={names.pgo_bolt_tarball: tarball, names.bolt_profile: profile},
    )


def _portable_arg(arg: str, repo: Path) -> str:
    """A cargo argument with the repository's path made relative (``--manifest-path hello/Cargo.toml``)."""
    prefix = str(repo.resolve()) + "/"
    return arg[len(prefix) :] if arg.startswith(prefix) else arg


def write_dir(out_dir: Path, files: Mapping[str, bytes]) -> None:
    """All the files in a new directory at once: written in a temp dir next to it, then renamed."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = out_dir.with_name(f".{out_dir.name}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        for name, data in files.items():
            write_atomically(staging / name, data)
        os.replace(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def summary_lines(manifest: Mapping[str, Any], out_dir: Path) -> list[str]:
    artefacts = manifest["artefacts"]
    return [
        f"release {manifest['tag']} ({manifest['commit'][:12]}) in {out_dir}",
        f"  {artefacts['plain']['file']}  binary sha256 {artefacts['plain']['binary_sha256']}",
        f"  {artefacts['pgo']['file']}  binary sha256 {artefacts['pgo']['binary_sha256']}",
        f"  {artefacts['profile']['file']}  sha256 {artefacts['profile']['sha256']}",
        *(
            [
                f"  {artefacts['pgo_bolt']['file']}  binary sha256 {artefacts['pgo_bolt']['binary_sha256']}",
                f"  {artefacts['bolt_profile']['file']}  sha256 {artefacts['bolt_profile']['sha256']}",
            ]
            if "pgo_bolt" in artefacts
            else []
        ),
        f"  {manifest['toolchain']['rustc']}; {manifest['toolchain']['cargo']}",
        f"  {manifest['target']}: both binaries {manifest['libc']}",
        *(
            [f"  the C of {', '.join(c['crate'] for c in c_code['crates'])}: profiled, by {c_code['clang']}"]
            if (c_code := manifest.get("c_code", {})).get("profiled")
            else []
        ),
    ]
