"""``nox -s rebuild -- vX.Y.Z`` and ``nox -s determinism``: the PGO binary again, from the profile alone.

rebuild: the published artefacts checked (every file there, every SHA256SUMS line, the profile the one the
manifest names), the toolchain checked against the manifest, then a fresh ``git worktree`` of the tag at
another path, the PGO build from the published profile, stripped, packed, and compared with SHA256SUMS.
determinism: the same build twice, from two worktrees of HEAD at two paths, compared with each other.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from recipes import cflags, report, stages
from recipes import diff as diffoscope
from recipes.bolt import find_llvm_strip
from recipes.config import Config
from recipes.errors import CheckFailed, ConfigError, EnvironmentRefused, MissingInput, PgoError, ToolchainError
from recipes.files import write_atomically
from recipes.matrix import refuse_twice
from recipes.provenance import (
    check_artefacts_folder,
    check_listing,
    check_manifest,
    check_manifest_schema,
    check_one_commit,
    read_manifest,
    read_sums,
    refuse_one_target_twice,
    release_file,
)
from recipes.release import (
    describe_rustc,
    relative_to_repo,
    reproducible_plan,
    strip_binary,
    strip_version,
    workload_of_tree,
)
from recipes.reproducible import (
    SUMS,
    Names,
    binary_diff,
    binary_tarball,
    commit_time,
    dirty_paths,
    git,
    release_binary,
    repo_root,
    sha256_bytes,
    tag_commit,
)
from recipes.results import DeterminismResult, OptimiseResult, RebuildResult
from recipes.runner import capture, say
from recipes.store import sha256_file
from recipes.toolchain import cargo_version, parse_rustc_vv, rustc_info
from recipes.workload import workload_path


@dataclass(frozen=True)
class Published:
    """A release's artefacts, checked against SHA256SUMS and the manifest."""

    directory: Path
    manifest: dict[str, Any]
    sums: dict[str, str]
    names: Names

    def path(self, kind: str) -> Path:
        return self.directory / str(self.manifest["artefacts"][kind]["file"])


def _require_file(path: Path, what: str) -> Path:
    if not path.is_file() and not path.is_symlink():
        raise MissingInput(f"{what} {path.name} is missing from {path.parent}", "download every file of the release")
    return release_file(path.parent, path.name)


def load_release(directory: Path, tag: str) -> list[Published]:
    """Read and check the artefacts of ``tag`` in ``directory``, one :class:`Published` per target's manifest (one
    SHA256SUMS for all of them, listing every file of every target and nothing else); every inconsistency is a
    refusal."""
    check_artefacts_folder(directory, tag)
    manifests = sorted(directory.glob(f"*-{tag}-*-manifest.json"))
    if not manifests:
        raise MissingInput(f"no *-{tag}-*-manifest.json in {directory}", "download every file of the release")
    _require_file(directory / SUMS, "the checksum file")
    sums = read_sums(directory)
    if len(manifests) > 1:
        refuse_one_target_twice(
            {path.name: _triple_or_none(path) for path in manifests},
            tag,
            f"in {directory}",
            "keep one target's files per directory",
        )
    published: list[Published] = []
    for manifest_path in manifests:
        if manifest_path.name not in sums:
            raise CheckFailed(f"{SUMS} has no line for {manifest_path.name}", "download SHA256SUMS again")
        manifest_sha = sha256_file(_require_file(manifest_path, "the manifest"))
        if manifest_sha != sums[manifest_path.name]:
            raise CheckFailed(
                f"{manifest_path.name} has sha256 {manifest_sha}, {SUMS} says {sums[manifest_path.name]}",
                "download it again",
            )
        manifest = read_manifest(manifest_path)
        if not isinstance(manifest, dict):
            raise CheckFailed(f"{manifest_path.name} is not a manifest (not a JSON object)", "download it again")
        if manifest.get("tag") != tag:
            raise CheckFailed(
                f"{manifest_path.name} is the manifest of {manifest.get('tag')}, not {tag}", "check the files"
            )
        check_manifest_schema(manifest, manifest_path.name)
        names = check_manifest(manifest, manifest_path.name)
        if names.manifest != manifest_path.name:
            raise CheckFailed(
                f"the manifest {manifest_path.name} names the release {names.base}, whose manifest is {names.manifest}",
                "download the release again",
            )
        published.append(Published(directory, manifest, sums, names))
    check_one_commit({p.names.manifest: p.manifest for p in published}, tag)
    needed: list[Path] = []
    for one in published:
        needed.append(_require_file(one.path("pgo"), "the PGO tarball"))
        needed.append(_require_file(one.path("profile"), "the profile"))
        if "pgo_bolt" in one.manifest["artefacts"]:
            needed.append(_require_file(one.path("pgo_bolt"), "the PGO+BOLT tarball"))
            needed.append(_require_file(one.path("bolt_profile"), "the BOLT profile"))
    check_listing(sums, [(p.manifest, p.names) for p in published], tag)
    for one in published:
        manifest = one.manifest
        profile = one.path("profile")
        profile_sha = sha256_file(profile)
        if profile_sha != manifest["profile_sha256"]:
            raise CheckFailed(
                f"the profile {profile.name} has sha256 {profile_sha}, the manifest records "
                f"{manifest['profile_sha256']}",
                "it is not the profile the release was built with: download it again",
            )
        if "pgo_bolt" in manifest["artefacts"]:
            bolt_profile = one.path("bolt_profile")
            if sha256_file(bolt_profile) != manifest["bolt"]["profile_sha256"]:
                raise CheckFailed(
                    f"the BOLT profile {bolt_profile.name} is not the one the manifest records",
                    "it is not the profile llvm-bolt used: download it again",
                )
    for path in needed:
        digest = sha256_file(path)
        if digest != sums[path.name]:
            raise CheckFailed(f"{path.name} has sha256 {digest}, {SUMS} says {sums[path.name]}", "download it again")
    return published


def load_published(directory: Path, tag: str) -> Published:
    """:func:`load_release` of a folder that holds one target's release."""
    published = load_release(directory, tag)
    if len(published) != 1:
        raise ValueError(f"{directory} holds {len(published)} targets' releases: use load_release")
    return published[0]


def _triple_or_none(path: Path) -> Any:
    """The ``triple`` of a manifest, read only to refuse two of one target before each is checked (None for a file
    that is not one: its own checks refuse it)."""
    try:
        data = read_manifest(path)
    except PgoError:
        return None
    return data.get("triple") if isinstance(data, dict) else None


def check_toolchain(manifest: Mapping[str, Any], env: Mapping[str, str]) -> None:
    """The rustc and cargo of the release, or a refusal naming both versions."""
    recorded = parse_rustc_vv(str(manifest["toolchain"]["rustc_vV"]))
    here = rustc_info(env)
    if here != recorded:
        raise ToolchainError(
            f"this is {describe_rustc(here)}, the release was built with {describe_rustc(recorded)}",
            f"install the release's toolchain (rustup toolchain install {recorded.release}) and select it "
            f"(RUSTUP_TOOLCHAIN={recorded.release})",
        )
    cargo_here = cargo_version(env)
    if cargo_here != manifest["toolchain"]["cargo"]:
        raise ToolchainError(
            f"this is {cargo_here}, the release was built with {manifest['toolchain']['cargo']}",
            "use the cargo of the release's toolchain",
        )
    strip_here = strip_version(env)
    if strip_here != manifest["toolchain"]["strip"]:
        say(f"note: this strip is {strip_here!r}, the release's was {manifest['toolchain']['strip']!r}")


def c_setting(manifest: Mapping[str, Any], env: Mapping[str, str]) -> tuple[bool, str | None]:
    """``PGO_C`` and ``PGO_CLANG`` of the rebuild, from the manifest and not from this machine's default: the C
    profiled by a clang of the recorded major (refused when there is none here), or left as the plain build has it
    (a release without the record is of before the C was profiled)."""
    record = manifest.get("c_code")
    if not isinstance(record, Mapping) or not record.get("profiled"):
        return False, None
    line = str(record.get("clang"))
    major = cflags.clang_major_of(line)
    if major is None:
        raise CheckFailed(
            f"the manifest says the C was profiled but names no clang version ({line[:80]!r})", "check the manifest"
        )
    found = cflags.find_clang_major(major, env)
    if found is None:
        raise ToolchainError(
            f"the release compiled its C with {line} and the profile; there is no clang-{major} here",
            f"`{cflags.package(major)}`: the rebuild compiles the C as the release did",
        )
    here = capture([str(found), "--version"], env=env).splitlines()[0].strip()
    if here != line:
        say(f"note: this clang is {here!r}, the release's was {line!r}")
    return True, str(found)


@dataclass(frozen=True)
class Built:
    """One PGO build from a profile in a fresh worktree: the stripped binary and the optimise stage's result."""

    binary: Path
    sha256: str
    optimise: OptimiseResult
    store_path: Path
    bolted: Path | None = None  # the PGO+BOLT binary, stripped by llvm-strip, when a BOLT profile was given
    bolted_sha256: str | None = None


def build_in_worktree(
    repo: Path,
    commit: str,
    config: Config,
    environ: Mapping[str, str],
    *,
    manifest_rel: str,
    workload_rel: str | None,
    profile: Path,
    work: Path,
    sde: int,
    label: str,
    expect_rustflags: list[str] | None = None,
    bolt_profile: Path | None = None,
) -> Built:
    """The optimised build of ``commit`` from ``profile`` alone, in a ``git worktree`` removed afterwards; with
    ``bolt_profile``, linked for BOLT and then BOLTed from that profile alone."""
    tmp = Path(tempfile.mkdtemp(prefix=f"pgo-{label}-"))
    source = tmp / "src"
    git(repo, "worktree", "add", "--detach", str(source), commit, env=environ)
    try:
        workload = source / workload_rel if workload_rel else None
        built_config = replace(
            config,
            manifest=source / manifest_rel,
            out=work,
            profdata=profile,
            workload=str(workload) if workload is not None and workload.is_file() else None,
            verify=False,
            test=False,
            bolt=bolt_profile is not None,
            bolt_profile=bolt_profile,
        )
        say(f"{label}: {commit[:12]} in {source}, work dir {work}")
        rplan = reproducible_plan(built_config, environ, source_root=source, sde=sde)
        if expect_rustflags is not None and list(rplan.portable_rustflags) != expect_rustflags:
            raise EnvironmentRefused(
                f"the base rustflags here are {' '.join(rplan.portable_rustflags) or '(none)'!r}, the release's were "
                f"{' '.join(expect_rustflags) or '(none)'!r}",
                f"set {rplan.plan.rustflags.var} as the manifest's rustflags say, or unset it",
            )
        result = stages.optimise(rplan.plan, verify=False)
        stripped = strip_binary(
            result.binary,
            work / "stripped" / rplan.plan.crate.bin,
            rplan.plan.env,
            work / "logs" / "strip.log",
        )
        built = Built(stripped, sha256_file(stripped), result, result.store_path)
        if bolt_profile is None:
            return built
        # the release's own BOLT profile (its sha256 checked against the manifest): what it gives is compared with
        # the release's PGO+BOLT binary, so it is not refused for want of a record of its training here
        bolted = stages.bolt(rplan.plan, vouched="the release's BOLT profile, its result compared with SHA256SUMS")
        bolted_stripped = strip_binary(
            bolted.binary,
            work / "stripped-bolt" / rplan.plan.crate.bin,
            rplan.plan.env,
            work / "logs" / "strip-bolt.log",
            str(find_llvm_strip(rplan.plan.rustc, rplan.plan.env)),
        )
        return replace(built, bolted=bolted_stripped, bolted_sha256=sha256_file(bolted_stripped))
    finally:
        with contextlib.suppress(PgoError):
            git(repo, "worktree", "remove", "--force", str(source), env=environ)
        shutil.rmtree(tmp, ignore_errors=True)
        git(repo, "worktree", "prune", env=environ)


def explain(
    first: Path, second: Path, dest: Path, environ: Mapping[str, str], record: RebuildResult | DeterminismResult
) -> str:
    """diffoscope's report of two differing binaries in ``dest``, its summary said and recorded; returns the
    hint's first words (where the report is, or which package would write one)."""
    explanation = diffoscope.explain(first, second, dest, environ)
    for line in explanation.lines:
        say(line)
    record["diffoscope"] = {
        "report": str(explanation.report) if explanation.report else None,
        "summary": list(explanation.lines),
    }
    if explanation.report is not None:
        return f"diffoscope's report: {explanation.report}; "
    if diffoscope.find_diffoscope(environ) is None:
        return f"install {diffoscope.PACKAGE} for diffoscope's report; "
    return ""


def _repo_of(config: Config, environ: Mapping[str, str]) -> Path:
    return repo_root(config.manifest.parent if config.manifest.parent.is_dir() else config.project_dir, environ)


def select_targets(published: Sequence[Published], targets: Sequence[str], tag: str) -> list[Published]:
    """The releases of the targets given (``--target``, glibc suffix or not), each once; all without one."""
    if not targets:
        return list(published)
    by_triple = {one.names.triple: one for one in published}
    chosen = []
    for triple in refuse_twice(targets):
        if triple not in by_triple:
            raise ConfigError(
                f"--target {triple}: the release {tag} in {published[0].directory} has no files of it",
                f"it holds {', '.join(by_triple)}",
            )
        chosen.append(by_triple[triple])
    return chosen


def rebuild(
    tag: str,
    config: Config,
    environ: Mapping[str, str],
    artefacts: Path | None = None,
    targets: Sequence[str] = (),
) -> list[RebuildResult]:
    """Rebuild the PGO binary of ``tag`` from its published profile and compare it with SHA256SUMS, for each target
    of the folder (or those of ``targets``); every target's files are checked before anything is built."""
    repo = _repo_of(config, environ)
    commit = tag_commit(repo, tag, environ)
    published = load_release((artefacts or repo / "dist" / tag).absolute(), tag)
    chosen = select_targets(published, targets, tag)
    checked = [_check_before_rebuild(one, tag, commit, repo, environ) for one in chosen]
    several = len(published) > 1
    work = (config.out / "rebuild" / tag).absolute()  # a folder of several targets: a work dir for each
    return [
        _rebuild_one(one, tag, commit, repo, config, environ, work / one.names.triple if several else work, c)
        for one, c in zip(chosen, checked, strict=True)
    ]


@dataclass(frozen=True)
class _Checked:
    """What the checks before a rebuild give it: the C setting and the published PGO binary."""

    c_on: bool
    clang: str | None
    published_binary: bytes


def _check_before_rebuild(
    published: Published, tag: str, commit: str, repo: Path, environ: Mapping[str, str]
) -> _Checked:
    manifest = published.manifest
    if commit != manifest["commit"]:
        raise CheckFailed(
            f"tag {tag} is commit {commit[:12]} here, the release was built from {manifest['commit'][:12]}",
            "the tag was moved: fetch the release's tag (git fetch --tags --force)",
        )
    check_toolchain(manifest, environ)
    c_on, clang = c_setting(manifest, environ)
    if commit_time(repo, commit, environ) != manifest["commit_time"]:
        raise CheckFailed(
            f"commit {commit[:12]} has another commit time than the manifest records", "check the manifest"
        )
    pgo = manifest["artefacts"]["pgo"]
    published_binary = release_binary(published.path("pgo"), pgo["binary"], manifest["source_date_epoch"])
    if sha256_bytes(published_binary) != pgo["binary_sha256"]:
        raise CheckFailed(f"the binary in {pgo['file']} is not the one the manifest records", "download it again")
    return _Checked(c_on, clang, published_binary)


def _rebuild_one(
    published: Published,
    tag: str,
    commit: str,
    repo: Path,
    config: Config,
    environ: Mapping[str, str],
    work: Path,
    checked: _Checked,
) -> RebuildResult:
    """One target's PGO binary (and PGO+BOLT binary) rebuilt in ``work``, compared with the published ones."""
    manifest = published.manifest
    pgo = manifest["artefacts"]["pgo"]
    c_on, clang, published_binary = checked.c_on, checked.clang, checked.published_binary
    shutil.rmtree(work, ignore_errors=True)
    as_released = replace(
        config,
        package=manifest["package"],
        bin=manifest["bin"],
        features=tuple(manifest["features"]),
        locked=bool(manifest["locked"]),
        target=manifest["target"],
        cargo=tuple(manifest["cargo_command"]),
        bolt_args=" ".join(manifest["bolt"]["bolt_args"]) if "bolt" in manifest else None,
        c=c_on,
        clang=clang,
    )
    built = build_in_worktree(
        repo,
        commit,
        as_released,
        environ,
        manifest_rel=manifest["manifest_path"],
        workload_rel=manifest.get("workload"),
        profile=published.path("profile"),
        work=work,
        sde=int(manifest["source_date_epoch"]),
        label="rebuild",
        expect_rustflags=list(manifest["rustflags"]),
        bolt_profile=published.path("bolt_profile") if "pgo_bolt" in manifest["artefacts"] else None,
    )
    if str(built.store_path) != manifest["profile_store_path"]:
        say(
            f"note: the release read the profile from {manifest['profile_store_path']}, this build from "
            f"{built.store_path} (PGO_PROFILE_STORE): the path is on rustc's command line"
        )
    top = pgo["binary"].split("/")[0]
    tarball = binary_tarball(manifest["bin"], built.binary.read_bytes(), top, int(manifest["source_date_epoch"]))
    write_atomically(work / pgo["file"], tarball)
    results = {
        pgo["file"]: (sha256_bytes(tarball), published.sums[pgo["file"]]),
        pgo["binary"]: (built.sha256, pgo["binary_sha256"]),
    }
    #: (published binary, rebuilt binary, what it is) of each binary rebuilt, the PGO one first
    binaries = [(published_binary, built.binary, "PGO")]
    if built.bolted is not None and built.bolted_sha256 is not None:
        bolt = manifest["artefacts"]["pgo_bolt"]
        bolt_tarball = binary_tarball(
            manifest["bin"], built.bolted.read_bytes(), bolt["binary"].split("/")[0], int(manifest["source_date_epoch"])
        )
        write_atomically(work / bolt["file"], bolt_tarball)
        results[bolt["file"]] = (sha256_bytes(bolt_tarball), published.sums[bolt["file"]])
        results[bolt["binary"]] = (built.bolted_sha256, bolt["binary_sha256"])
        published_bolted = release_binary(published.path("pgo_bolt"), bolt["binary"], manifest["source_date_epoch"])
        binaries.append((published_bolted, built.bolted, "PGO+BOLT"))
    lines = []
    for name, (rebuilt, expected) in results.items():
        verdict = "match" if rebuilt == expected else "mismatch"
        lines.append(
            f"{verdict:8}  {name}  rebuilt {rebuilt}" + ("" if rebuilt == expected else f", published {expected}")
        )
        say(f"rebuild: {lines[-1]}")
    summary: RebuildResult = {
        "tag": tag,
        "commit": commit,
        "binary": str(built.binary),
        "binary_sha256": built.sha256,
        "store_path": str(built.store_path),
        "lines": lines,
        "match": all(a == b for a, b in results.values()),
    }
    if built.bolted is not None:
        summary["bolted_binary"] = str(built.bolted)
        summary["bolted_binary_sha256"] = built.bolted_sha256
    differing = [
        (data, rebuilt_binary, what)
        for data, rebuilt_binary, what in binaries
        if sha256_bytes(data) != sha256_file(rebuilt_binary)
    ]
    if not summary["match"] and differing:
        data, rebuilt_binary, what = differing[0]
        released = work / ("published-bolt" if what == "PGO+BOLT" else "published") / manifest["bin"]
        released.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(released, data)
        diff = binary_diff(released, rebuilt_binary)
        summary["diff"] = diff.line()
        explained = explain(released, rebuilt_binary, work, environ, summary)
        report.record(work, "rebuild", summary)
        raise CheckFailed(
            f"the rebuilt {what} binary of {tag} differs from the published one: {diff.line()}",
            f"{explained}compare {released} and {rebuilt_binary}; same toolchain, store path and flags as the "
            "manifest?",
        )
    if not summary["match"]:  # the binaries match and a tarball does not
        report.record(work, "rebuild", summary)
        raise CheckFailed(
            f"the rebuilt binaries of {tag} match the published ones but a tarball does not: "
            + "; ".join(line for line in lines if line.startswith("mismatch")),
            "the tarballs are packed deterministically: is tar or gzip of the release another?",
        )
    report.record(work, "rebuild", summary)
    return summary


def determinism(config: Config, environ: Mapping[str, str]) -> DeterminismResult:
    """Build HEAD twice from the profile alone, in two worktrees at two paths; the binaries must be equal."""
    repo = _repo_of(config, environ)
    dirty = dirty_paths(repo, environ)
    if dirty:
        raise EnvironmentRefused(
            f"the worktree of {repo} is dirty ({dirty[0]}…): the builds are of HEAD and would not include it",
            "commit the changes first",
        )
    commit = git(repo, "rev-parse", "HEAD", env=environ)
    if config.profdata is not None:
        profile = config.profdata
    else:
        merged = report.require(config.out, "merge", "determinism")
        profile = merged.profile
    if not profile.is_file():
        raise MissingInput(f"the profile {profile} is gone", "run `nox -s pgo` first, or give PGO_PROFDATA")
    profile_copy = config.out / "determinism" / "profile.profdata"  # the merge of a later run must not change it
    profile_copy.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(profile_copy, profile.read_bytes())
    manifest_rel = relative_to_repo(config.manifest, repo, "the manifest")
    config = workload_of_tree(config, repo)
    workload_rel = None
    if config.workload is not None:
        candidate = workload_path(config.project_dir, config.workload).resolve()
        if candidate.is_relative_to(repo.resolve()):
            workload_rel = str(candidate.relative_to(repo.resolve()))
    sde = commit_time(repo, commit, environ)
    builds = []
    for label in ("first", "second"):
        builds.append(
            build_in_worktree(
                repo,
                commit,
                config,
                environ,
                manifest_rel=manifest_rel,
                workload_rel=workload_rel,
                profile=profile_copy,
                work=(config.out / "determinism" / label).absolute(),
                sde=sde,
                label=f"determinism-{label}",
            )
        )
    first, second = builds
    result: DeterminismResult = {
        "commit": commit,
        "profile_sha256": sha256_file(profile_copy),
        "binaries": [str(b.binary) for b in builds],
        "binary_sha256": [b.sha256 for b in builds],
        "identical": first.sha256 == second.sha256,
    }
    if not result["identical"]:
        diff = binary_diff(first.binary, second.binary)
        result["diff"] = diff.line()
        explained = explain(first.binary, second.binary, config.out / "determinism", environ, result)
        report.record(config.out, "determinism", result)
        raise CheckFailed(
            f"two builds from one profile in two work directories differ: {diff.line()}",
            f"{explained}a path or a time gets into the binary: see the two optimise-build.log files",
        )
    report.record(config.out, "determinism", result)
    say(f"determinism: the two builds are identical, sha256 {first.sha256}")
    return result
