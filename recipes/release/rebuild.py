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

from recipes import report
from recipes.config import Config
from recipes.errors import CheckFailed, ConfigError, EnvironmentRefused, MissingInput, PgoError, ToolchainError
from recipes.files import write_atomically
from recipes.inputs import not_a_file
from recipes.llvm.boltlib import find_llvm_strip
from recipes.release import diff as diffoscope
from recipes.release import manifest as release_manifest
from recipes.release.make import (
    ReproduciblePlan,
    describe_rustc,
    relative_to_repo,
    reproducible_plan,
    strip_binary,
    strip_version,
    workload_of_tree,
)
from recipes.release.manifest import CCode, Manifest, Toolchain
from recipes.release.matrix import refuse_twice
from recipes.release.provenance import (
    artefact,
    check_artefacts_folder,
    check_listed,
    check_listing,
    check_named,
    check_one_commit,
    check_tag_commit,
    read_manifest,
    read_sums,
    refuse_one_target_twice,
    release_file,
)
from recipes.release.reproducible import (
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
from recipes.results import DeterminismResult, DiffoscopeRecord, OptimiseResult, RebuildResult
from recipes.runner import capture, say
from recipes.stages.bolt import bolt
from recipes.stages.frame import StageFrame
from recipes.stages.optimise import optimise
from recipes.store import sha256_file
from recipes.toolchain import cflags
from recipes.toolchain.rustc import cargo_version, parse_rustc_vv, resolve_rustc, split_toolchain
from recipes.toolchain.rustflags import cargo_config_files
from recipes.workdir import WorkDir
from recipes.workload import workload_path


@dataclass(frozen=True)
class Published:
    """A release's artefacts, checked against SHA256SUMS and the manifest."""

    directory: Path
    manifest: Manifest
    sums: dict[str, str]
    names: Names

    def path(self, kind: str) -> Path:
        return self.directory / artefact(self.manifest, kind).file


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
    loaded = [_load_manifest(path, sums, tag) for path in manifests]
    published = [Published(directory, manifest, sums, manifest.names) for manifest in loaded]
    check_one_commit({p.names.manifest: p.manifest for p in published}, tag)
    needed = [path for one in published for path in _required_files(one)]
    check_listing(sums, [p.manifest for p in published], tag)
    for one in published:
        _check_profiles(one)
    for path in needed:
        check_listed(path, sums)
    return published


def _load_manifest(path: Path, sums: Mapping[str, str], tag: str) -> Manifest:
    """One manifest of the folder: listed in SHA256SUMS with its sha256, of ``tag``, every key typed
    (:func:`recipes.release.manifest.parse`), named as its release names it."""
    if path.name not in sums:
        raise CheckFailed(f"{SUMS} has no line for {path.name}", "download SHA256SUMS again")
    check_listed(_require_file(path, "the manifest"), sums)
    data = read_manifest(path)
    if not isinstance(data, dict):
        raise CheckFailed(f"{path.name} is not a manifest (not a JSON object)", "download it again")
    if (found := release_manifest.peek(data, "tag")) != tag:
        raise CheckFailed(f"{path.name} is the manifest of {found}, not {tag}", "check the files")
    manifest = release_manifest.parse(data, path.name)
    check_named(path.name, manifest)
    return manifest


def _required_files(one: Published) -> list[Path]:
    """The files a rebuild of ``one`` reads: the PGO tarball and the profile (and the PGO+BOLT ones)."""
    needed = [_require_file(one.path("pgo"), "the PGO tarball"), _require_file(one.path("profile"), "the profile")]
    if one.manifest.artefacts.pgo_bolt is not None:
        needed.append(_require_file(one.path("pgo_bolt"), "the PGO+BOLT tarball"))
        needed.append(_require_file(one.path("bolt_profile"), "the BOLT profile"))
    return needed


def _check_profiles(one: Published) -> None:
    """The profile (and the BOLT profile) the manifest records, by sha256."""
    manifest = one.manifest
    profile = one.path("profile")
    profile_sha = sha256_file(profile)
    if profile_sha != manifest.profile_sha256:
        raise CheckFailed(
            f"the profile {profile.name} has sha256 {profile_sha}, the manifest records {manifest.profile_sha256}",
            "it is not the profile the release was built with: download it again",
        )
    if manifest.bolt is not None and manifest.artefacts.pgo_bolt is not None:
        bolt_profile = one.path("bolt_profile")
        if sha256_file(bolt_profile) != manifest.bolt.profile_sha256:
            raise CheckFailed(
                f"the BOLT profile {bolt_profile.name} is not the one the manifest records",
                "it is not the profile llvm-bolt used: download it again",
            )


def _triple_or_none(path: Path) -> Any:
    """The ``triple`` of a manifest, read only to refuse two of one target before each is checked (None for a file
    that is not one: its own checks refuse it)."""
    try:
        data = read_manifest(path)
    except PgoError:
        return None
    return release_manifest.peek(data, "triple")


def check_toolchain(toolchain: Toolchain, environ: Mapping[str, str], crate_dir: Path, cargo: Sequence[str]) -> None:
    """The rustc and cargo of the release, resolved as the build resolves them (in the rebuilt crate's directory,
    with the release's cargo command), or a refusal naming both versions."""
    recorded = parse_rustc_vv(toolchain.rustc_vv)
    plus, _ = split_toolchain(cargo)
    resolved, env = resolve_rustc(crate_dir, environ, cargo_config_files(crate_dir, environ), plus)
    here = resolved.info
    if here != recorded:
        raise ToolchainError(
            f"this is {describe_rustc(here)}, the release was built with {describe_rustc(recorded)}",
            f"install the release's toolchain (rustup toolchain install {recorded.release}) and select it "
            f"(RUSTUP_TOOLCHAIN={recorded.release})",
        )
    cargo_here = cargo_version(env, crate_dir)
    if cargo_here != toolchain.cargo:
        raise ToolchainError(
            f"this is {cargo_here}, the release was built with {toolchain.cargo}",
            "use the cargo of the release's toolchain",
        )
    strip_here = strip_version(env)
    if strip_here != toolchain.strip:
        say(f"note: this strip is {strip_here!r}, the release's was {toolchain.strip!r}")


def c_setting(record: CCode | None, env: Mapping[str, str]) -> tuple[bool, str | None]:
    """``PGO_C`` and ``PGO_CLANG`` of the rebuild, from the manifest and not from this machine's default: the C
    profiled by a clang of the recorded major (refused when there is none here), or left as the plain build has it
    (a release without the record is of before the C was profiled)."""
    if record is None or not record.profiled:
        return False, None
    line = str(record.clang)
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
    bolted: Path | None = None  # the PGO+BOLT binary, stripped by llvm-strip, when a BOLT profile was given
    bolted_sha256: str | None = None


@dataclass(frozen=True)
class FromProfile:
    """What one build from a profile alone builds: ``commit`` of ``repo`` (its ``manifest_rel`` and workload,
    ``workload_rel``, in the tree), from ``profile`` (and ``bolt_profile``: linked for BOLT and BOLTed), in ``work``
    with SOURCE_DATE_EPOCH ``sde``; ``label`` names it in the progress lines and its temporary directory;
    ``expect_rustflags``: the base rustflags the release recorded (None: not checked)."""

    repo: Path
    commit: str
    manifest_rel: str
    workload_rel: str | None
    profile: Path
    work: Path
    sde: int
    label: str
    expect_rustflags: tuple[str, ...] | None = None
    bolt_profile: Path | None = None


def build_in_worktree(spec: FromProfile, config: Config, environ: Mapping[str, str]) -> Built:
    """The optimised build of ``spec.commit`` from its profile alone, in a ``git worktree`` removed afterwards;
    with a BOLT profile, linked for BOLT and then BOLTed from that profile alone."""
    tmp = Path(tempfile.mkdtemp(prefix=f"pgo-{spec.label}-"))
    source = tmp / "src"
    git(spec.repo, "worktree", "add", "--detach", str(source), spec.commit, env=environ)
    try:
        say(f"{spec.label}: {spec.commit[:12]} in {source}, work dir {spec.work}")
        rplan = reproducible_plan(worktree_config(spec, config, source), environ, source_root=source, sde=spec.sde)
        refuse_other_rustflags(rplan, spec.expect_rustflags)
        built = build_from_profile(rplan, spec.work)
        return built if spec.bolt_profile is None else bolt_from_profile(rplan, spec.work, built)
    finally:
        with contextlib.suppress(PgoError):
            git(spec.repo, "worktree", "remove", "--force", str(source), env=environ)
        shutil.rmtree(tmp, ignore_errors=True)
        git(spec.repo, "worktree", "prune", env=environ)


def worktree_config(spec: FromProfile, config: Config, source: Path) -> Config:
    """``config`` pointed at the worktree ``source``: its manifest and workload, the profile, the work dir; no
    replay, no tests; BOLT when a BOLT profile is given."""
    workload = source / spec.workload_rel if spec.workload_rel else None
    return replace(
        config,
        manifest=source / spec.manifest_rel,
        out=spec.work,
        profdata=spec.profile,
        workload=str(workload) if workload is not None and workload.is_file() else None,
        verify=False,
        test=False,
        bolt=spec.bolt_profile is not None,
        bolt_profile=spec.bolt_profile,
    )


def refuse_other_rustflags(rplan: ReproduciblePlan, expected: Sequence[str] | None) -> None:
    """Refuse base rustflags here other than the release's (None: nothing to compare with)."""
    if expected is not None and rplan.portable_rustflags != tuple(expected):
        raise EnvironmentRefused(
            f"the base rustflags here are {' '.join(rplan.portable_rustflags) or '(none)'!r}, the release's were "
            f"{' '.join(expected) or '(none)'!r}",
            f"set {rplan.plan.rustflags.var} as the manifest's rustflags say, or unset it",
        )


def build_from_profile(rplan: ReproduciblePlan, work: Path) -> Built:
    """The optimise stage from the plan's profile, its binary stripped under ``work/stripped``."""
    result = optimise(rplan.plan, verify=False)
    stripped = strip_binary(
        result.binary,
        WorkDir(work).stripped(rplan.plan.crate.bin),
        rplan.plan.env,
        WorkDir(work).logs / "strip.log",
    )
    return Built(stripped, sha256_file(stripped), result)


def bolt_from_profile(rplan: ReproduciblePlan, work: Path, built: Built) -> Built:
    """The bolt stage from the release's own BOLT profile (its sha256 checked against the manifest): what it gives
    is compared with the release's PGO+BOLT binary, so it is not refused for want of a record of its training
    here; stripped by llvm-strip under ``work/stripped-bolt``."""
    bolted = bolt(rplan.plan, vouched="the release's BOLT profile, its result compared with SHA256SUMS")
    bolted_stripped = strip_binary(
        bolted.binary,
        WorkDir(work).stripped_bolt(rplan.plan.crate.bin),
        rplan.plan.env,
        WorkDir(work).logs / "strip-bolt.log",
        str(find_llvm_strip(rplan.plan.rustc, rplan.plan.env)),
    )
    return replace(built, bolted=bolted_stripped, bolted_sha256=sha256_file(bolted_stripped))


def explain(first: Path, second: Path, dest: Path, environ: Mapping[str, str]) -> tuple[str, DiffoscopeRecord]:
    """diffoscope's report of two differing binaries in ``dest``, its summary said; the hint's first words (where
    the report is, or which package would write one) and the record of it."""
    explanation = diffoscope.explain(first, second, dest, environ)
    for line in explanation.lines:
        say(line)
    record: DiffoscopeRecord = {
        "report": str(explanation.report) if explanation.report else None,
        "summary": list(explanation.lines),
    }
    return diffoscope.hint_words(explanation, environ), record


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


def rebuild_checked(
    targets: Sequence[RebuildTarget], config: Config, environ: Mapping[str, str]
) -> list[RebuildResult]:
    """The rebuild of targets :func:`rebuild_targets` checked (the session holds the work dir meanwhile)."""
    return [_rebuild_one(target, config, environ) for target in targets]


def rebuild_targets(
    tag: str,
    config: Config,
    environ: Mapping[str, str],
    artefacts: Path | None = None,
    targets: Sequence[str] = (),
) -> list[RebuildTarget]:
    """Every target of the release to rebuild, its files and toolchain checked, before anything is built or the work
    dir is touched."""
    repo = _repo_of(config, environ)
    commit = tag_commit(repo, tag, environ)
    published = load_release((artefacts or repo / "dist" / tag).absolute(), tag)
    chosen = select_targets(published, targets, tag)
    checked = [_check_before_rebuild(one, tag, commit, repo, environ) for one in chosen]
    several = len(published) > 1
    work = WorkDir(config.out).rebuild(tag).absolute()  # a folder of several targets: a work dir for each
    return [
        RebuildTarget(one, tag, commit, repo, WorkDir(work).for_target(one.names.triple) if several else work, *c)
        for one, c in zip(chosen, checked, strict=True)
    ]


def _check_before_rebuild(
    published: Published, tag: str, commit: str, repo: Path, environ: Mapping[str, str]
) -> tuple[bool, str | None, bytes]:
    """What the checks before a rebuild give it: the C setting (``PGO_C``, ``PGO_CLANG``) and the published PGO
    binary."""
    manifest = published.manifest
    check_tag_commit(tag, commit, manifest)
    crate_dir = (repo / manifest.manifest_path).parent
    check_toolchain(manifest.toolchain, environ, crate_dir if crate_dir.is_dir() else repo, manifest.cargo_command)
    c_on, clang = c_setting(manifest.c_code, environ)
    if commit_time(repo, commit, environ) != manifest.commit_time:
        raise CheckFailed(
            f"commit {commit[:12]} has another commit time than the manifest records", "check the manifest"
        )
    pgo = manifest.artefacts.pgo
    published_binary = release_binary(published.path("pgo"), str(pgo.binary), manifest.source_date_epoch)
    if sha256_bytes(published_binary) != pgo.binary_sha256:
        raise CheckFailed(f"the binary in {pgo.file} is not the one the manifest records", "download it again")
    return c_on, clang, published_binary


@dataclass(frozen=True)
class RebuildTarget:
    """One target's rebuild: the published release (checked), its tag and commit in ``repo``, the work dir; what
    the checks before it gave: the C setting and the published PGO binary."""

    published: Published
    tag: str
    commit: str
    repo: Path
    work: Path
    c_on: bool
    clang: str | None
    published_binary: bytes


def _rebuild_one(target: RebuildTarget, config: Config, environ: Mapping[str, str]) -> RebuildResult:
    """One target's PGO binary (and PGO+BOLT binary) rebuilt in its work dir, compared with the published ones."""
    shutil.rmtree(target.work, ignore_errors=True)
    with StageFrame(target.work, "rebuild", timed=False) as frame:
        built = rebuild_from_published(target, config, environ)
        compared = compare_with_published(target, built)
        summary = rebuild_record(target, built, compared)
        if not summary.match:
            summary, refusal = mismatch_refusal(target, compared, summary, environ)
            with frame.kept(lambda: summary):  # the failure record: each file's line, where the binaries differ
                raise refusal
        return frame.done(summary)


def as_released(config: Config, target: RebuildTarget) -> Config:
    """``config`` with what the release recorded: the package, binary, features, target, cargo command, llvm-bolt's
    arguments and the C setting."""
    manifest = target.published.manifest
    return replace(
        config,
        package=manifest.package,
        bin=manifest.bin,
        features=manifest.features,
        locked=manifest.locked,
        target=manifest.target,
        cargo=manifest.cargo_command,
        bolt_args=" ".join(manifest.bolt.bolt_args) if manifest.bolt is not None else None,
        c=target.c_on,
        cxx=None,  # the release profiled its C and C++ alike (nox -s release refuses PGO_CXX and PGO_C lists)
        clang=target.clang,
        # the published profile is the one the build read: used as it is; a partial one's left-out records are
        # functions without profile data here, as many as the release's build counted (its binary, compared byte
        # for byte, is the judge)
        partial=False,
        **released_missing(manifest),
    )


def released_missing(manifest: release_manifest.Manifest) -> dict[str, Any]:
    """A partial release's ceiling of functions without profile data: what its build counted, never-run or not."""
    if manifest.partial is None or manifest.pgo_build is None:
        return {}
    return {"max_missing": manifest.pgo_build.missing_profile_functions + manifest.partial.never_run_functions}


def rebuild_from_published(target: RebuildTarget, config: Config, environ: Mapping[str, str]) -> Built:
    """The PGO (and PGO+BOLT) build of the release's commit from its published profiles, as the release did."""
    published, manifest = target.published, target.published.manifest
    spec = FromProfile(
        target.repo,
        target.commit,
        manifest_rel=manifest.manifest_path,
        workload_rel=manifest.workload,
        profile=published.path("profile"),
        work=target.work,
        sde=manifest.source_date_epoch,
        label="rebuild",
        expect_rustflags=manifest.rustflags,
        bolt_profile=published.path("bolt_profile") if manifest.artefacts.pgo_bolt is not None else None,
    )
    built = build_in_worktree(spec, as_released(config, target), environ)
    if str(built.optimise.store_path) != manifest.profile_store_path:
        say(
            f"note: the release read the profile from {manifest.profile_store_path}, this build from "
            f"{built.optimise.store_path} (PGO_PROFILE_STORE): the path is on rustc's command line"
        )
    return built


@dataclass(frozen=True)
class Compared:
    """The rebuilt files against the published ones: ``{name: (rebuilt sha256, published sha256)}`` of each tarball
    and binary, and (published binary, rebuilt binary, what it is) of each binary, the PGO one first."""

    results: dict[str, tuple[str, str | None]]
    binaries: list[tuple[bytes, Path, str]]


def compare_with_published(target: RebuildTarget, built: Built) -> Compared:
    """Each rebuilt binary packed as the release packs it (the tarball written in the work dir) and its sha256s
    set beside the published ones."""
    published, manifest = target.published, target.published.manifest
    rebuilt = [("pgo", built.binary, built.sha256, "PGO")]
    if built.bolted is not None and built.bolted_sha256 is not None:
        rebuilt.append(("pgo_bolt", built.bolted, built.bolted_sha256, "PGO+BOLT"))
    results: dict[str, tuple[str, str | None]] = {}
    binaries = []
    for kind, binary, binary_sha256, what in rebuilt:
        one = artefact(manifest, kind)
        tarball = binary_tarball(manifest.bin, binary.read_bytes(), one.top, manifest.source_date_epoch)
        write_atomically(WorkDir(target.work).artefact(one.file), tarball)
        results[one.file] = (sha256_bytes(tarball), published.sums[one.file])
        results[str(one.binary)] = (binary_sha256, one.binary_sha256)
        data = (
            target.published_binary
            if kind == "pgo"
            else release_binary(published.path(kind), str(one.binary), manifest.source_date_epoch)
        )
        binaries.append((data, binary, what))
    return Compared(results, binaries)


def rebuild_record(target: RebuildTarget, built: Built, compared: Compared) -> RebuildResult:
    """The rebuild's record: a line per file (match or mismatch), whether all match."""
    lines = []
    for name, (rebuilt, expected) in compared.results.items():
        verdict = "match" if rebuilt == expected else "mismatch"
        lines.append(
            f"{verdict:8}  {name}  rebuilt {rebuilt}" + ("" if rebuilt == expected else f", published {expected}")
        )
        say(f"rebuild: {lines[-1]}")
    return RebuildResult(
        tag=target.tag,
        commit=target.commit,
        binary=built.binary,
        binary_sha256=built.sha256,
        store_path=built.optimise.store_path,
        lines=lines,
        match=all(a == b for a, b in compared.results.values()),
        bolted_binary=built.bolted,
        bolted_binary_sha256=built.bolted_sha256 if built.bolted is not None else None,
    )


def mismatch_refusal(
    target: RebuildTarget, compared: Compared, summary: RebuildResult, environ: Mapping[str, str]
) -> tuple[RebuildResult, CheckFailed]:
    """The refusal of a rebuild that does not match, and its record: where the first differing binary differs
    (diffoscope's report when there is diffoscope), or which tarball differs around equal binaries."""
    work, tag = target.work, target.tag
    differing = [one for one in compared.binaries if sha256_bytes(one[0]) != sha256_file(one[1])]
    if differing:
        data, rebuilt_binary, what = differing[0]
        copy_of = WorkDir(work).published_bolt if what == "PGO+BOLT" else WorkDir(work).published
        released = copy_of(target.published.manifest.bin)
        released.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(released, data)
        diff = binary_diff(released, rebuilt_binary)
        explained, diffoscope_record = explain(released, rebuilt_binary, work, environ)
        return replace(summary, diff=diff.line(), diffoscope=diffoscope_record), CheckFailed(
            f"the rebuilt {what} binary of {tag} differs from the published one: {diff.line()}",
            f"{explained}compare {released} and {rebuilt_binary}; same toolchain, store path and flags as the "
            "manifest?",
        )
    return summary, CheckFailed(  # the binaries match and a tarball does not
        f"the rebuilt binaries of {tag} match the published ones but a tarball does not: "
        + "; ".join(line for line in summary.lines if line.startswith("mismatch")),
        "the tarballs are packed deterministically: is tar or gzip of the release another?",
    )


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
    with StageFrame(config.out, "determinism", timed=False) as frame:  # the two builds and their comparison
        profile = determinism_profile(config)
        manifest_rel = relative_to_repo(config.manifest, repo, "the manifest")
        config = workload_of_tree(config, repo)
        sde = commit_time(repo, commit, environ)
        builds = [
            build_in_worktree(
                FromProfile(
                    repo,
                    commit,
                    manifest_rel=manifest_rel,
                    workload_rel=workload_in_repo(config, repo),
                    profile=profile,
                    work=WorkDir(config.out).determinism(label).absolute(),
                    sde=sde,
                    label=f"determinism-{label}",
                ),
                config,
                environ,
            )
            for label in ("first", "second")
        ]
        return compare_two_builds(frame, config, environ, (commit, profile), builds)


def determinism_profile(config: Config) -> Path:
    """A copy of the profile (PGO_PROFDATA, else the last merge's) in ``<work>/determinism``: the merge of a later
    run must not change it."""
    if config.profdata is not None and (what := not_a_file(config.profdata)) not in (None, "no such file"):
        raise MissingInput(
            f"PGO_PROFDATA={config.profdata}: {what}, not a regular file", "give the path of a .profdata"
        )
    profile = config.profdata or report.require(config.out, "merge", "determinism").profile
    if not profile.is_file():
        raise MissingInput(f"the profile {profile} is gone", "run `nox -s pgo` first, or give PGO_PROFDATA")
    profile_copy = WorkDir(config.out).determinism_profile
    profile_copy.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(profile_copy, profile.read_bytes())
    return profile_copy


def workload_in_repo(config: Config, repo: Path) -> str | None:
    """The configured workload's path in the repository (None: none, or one outside it)."""
    if config.workload is None:
        return None
    candidate = workload_path(config.project_dir, config.workload).resolve()
    if candidate.is_relative_to(repo.resolve()):
        return str(candidate.relative_to(repo.resolve()))
    return None


def compare_two_builds(
    frame: StageFrame,
    config: Config,
    environ: Mapping[str, str],
    source: tuple[str, Path],
    builds: Sequence[Built],
) -> DeterminismResult:
    """The determinism record of two builds of ``source`` (a commit and the profile): identical, or refused with
    where they differ."""
    commit, profile = source
    first, second = builds
    result = DeterminismResult(
        commit=commit,
        profile_sha256=sha256_file(profile),
        binaries=[str(b.binary) for b in builds],
        binary_sha256=[b.sha256 for b in builds],
        identical=first.sha256 == second.sha256,
    )
    if not result.identical:
        diff = binary_diff(first.binary, second.binary)
        explained, diffoscope_record = explain(first.binary, second.binary, WorkDir(config.out).determinism(), environ)
        result = replace(result, diff=diff.line(), diffoscope=diffoscope_record)
        with frame.kept(lambda: result):  # the failure record: both binaries, where they differ
            raise CheckFailed(
                f"two builds from one profile in two work directories differ: {diff.line()}",
                f"{explained}a path or a time gets into the binary: see the two optimise-build.log files",
            )
    say(f"determinism: the two builds are identical, sha256 {first.sha256}")
    return frame.done(result)
