"""The pipeline's Nox sessions, for this repository's noxfile and for a noxfile in any crate's own project.

A project that installed pgo-recipes with pip needs a noxfile of three lines::

    import recipes.sessions

    recipes.sessions.register_pgo_sessions()

and runs ``nox -s pgo`` (or instrument, train, merge, optimise, pgo-test, plain, cpu-baseline, release, rebuild,
determinism, verify, image) from its root. Every session reads the configuration of the project nox was *invoked from*
(``session.invoked_from``): its ``pyproject.toml`` ``[tool.pgo]``, ``PGO_*`` variables and posargs, with relative
paths taken from that directory. ``nox -f path/to/pgo-recipes/noxfile.py -s pgo`` from the project's root is the
same thing without installing anything.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import chdir, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import nox

from recipes import procs, report
from recipes.claim import CrateIdentity, claim, identity_of_config
from recipes.config import Config, load_config
from recipes.errors import PgoError
from recipes.inputs import user_path
from recipes.plan import BuildPlan, make_plan
from recipes.procs import Interrupted
from recipes.release import cpu
from recipes.release.reproducible.oci import Base
from recipes.release.reproducible.tags import take_gather
from recipes.results import PlainResult
from recipes.runner import say
from recipes.stages import gather
from recipes.stages.bolt import bolt as bolt_stage
from recipes.stages.instrument import instrument as instrument_stage
from recipes.stages.merge import merge as merge_stage
from recipes.stages.optimise import optimise as optimise_stage
from recipes.stages.pipeline import pgo as pgo_stage
from recipes.stages.plain import compared
from recipes.stages.summary import c_code_lines, summary_lines
from recipes.stages.test import test as test_stage
from recipes.stages.train import train as train_stage
from recipes.workdir import WorkDir

if TYPE_CHECKING:
    from recipes.release.args import DeterminismArgs, ImageArgs, RebuildArgs, ReleaseArgs, VerifyArgs


def project_dir(session: nox.Session) -> Path:
    """The user's project: the directory nox was run from (nox itself changes into the noxfile's folder)."""
    return Path(session.invoked_from).resolve()


@contextmanager
def children_recorded(work: Path) -> Iterator[None]:
    """The session's work in ``work``: first what a killed session of this work dir left running is killed
    (``procs.reclaim``: only a recorded pid whose start time is still the recorded one), saying so in one line;
    then every child recorded while it runs (``procs.recording_children``)."""
    left = procs.reclaim(WorkDir(work).children)
    if left:
        say(f"a session of {work} that was killed {procs.leftovers_line(left)}")
    with procs.recording_children(WorkDir(work).children):
        yield


#: the signal that ended a session of this nox run, if one did: the sessions after it are not run
_interrupted: list[str] = []


def guarded(function: Callable[[nox.Session], None]) -> Callable[[nox.Session], None]:
    """``function`` as a session: the one place a known failure (:class:`~recipes.errors.PgoError`) becomes nox's,
    in one line and no traceback, and where SIGTERM, SIGHUP or SIGINT ends it in one line (``procs.forwarding_signals``:
    forwarded to its children, which are stopped and reaped), not a traceback nor a child left running; the
    sessions named after it on nox's command line (``nox -s train merge``) are then skipped, as nox would go on to
    them."""

    @functools.wraps(function)
    def session_of(session: nox.Session) -> None:
        if _interrupted:
            session.skip(f"not run: an earlier session of this nox run was interrupted by {_interrupted[0]}")
        procs.open_files_to_hard_limit()  # h2load's and the server's connections: one file descriptor each
        try:
            with procs.forwarding_signals():
                function(session)
        except Interrupted as stop:
            _interrupted.append(stop.signal_name)
            session.error(stop.line())
        except PgoError as error:
            session.error(error.line())

    return session_of


@dataclass(frozen=True)
class PlanStage:
    """A session that runs one stage of the pipeline (or all of them) on the plan, and what its plan must find
    before anything is built, each a rule of the configuration: ``instruments``, an instrumented build (rustc's
    LLVM must be one an llvm-profdata here reads); ``profdata``, llvm-profdata run (of rustc's LLVM); ``bolt``,
    llvm-bolt run. ``doc`` is the session's line in ``nox -l``."""

    run: Callable[[BuildPlan], object]
    doc: str
    instruments: Callable[[Config], bool] = lambda _config: False
    profdata: bool = False
    bolt: Callable[[Config], bool] = lambda _config: False


#: the sessions of one stage each, and pgo, by name: what each runs and what its plan must find
PLAN_STAGES: dict[str, PlanStage] = {
    "instrument": PlanStage(
        instrument_stage, "Build the instrumented binary (-Cprofile-generate) in its own target dir.",
        instruments=lambda _config: True,
        profdata=True,  # its raw profiles are read by an llvm-profdata of rustc's LLVM alone
    ),
    "train": PlanStage(
        train_stage, "Run the training workload (profiles/<workload>.toml) on the instrumented binary; -- --shard "
        "NAME: one of the shards alone, for a later merge -- --gather.",
    ),
    "merge": PlanStage(
        merge_stage, "Merge the raw profiles with rustc's own LLVM's llvm-profdata; check the executed-function floor; "
        "-- --gather DIR…: the shards trained in those work dirs (each a train -- --shard's).",
        profdata=True,
    ),
    "optimise": PlanStage(
        optimise_stage, "Build with -Cprofile-use from the profile store, and check the result.",
        profdata=True, bolt=lambda config: config.bolt,
    ),
    "bolt": PlanStage(
        bolt_stage,
        "BOLT the optimised binary (PGO_BOLT=1 optimise): its own instrumentation and training, llvm-bolt, checks.",
        bolt=lambda _config: True,
    ),
    "pgo": PlanStage(
        pgo_stage, "All four stages in order, every check on (PGO_BOLT=1: then the bolt stage).",
        instruments=lambda config: config.profdata is None, profdata=True, bolt=lambda config: config.bolt,
    ),
    "pgo-test": PlanStage(
        test_stage, "The test suite compiled with the optimised build's profile, flags and target (<work>/test-target)."
    ),
}  # fmt: skip


@dataclass(frozen=True)
class Invocation:
    """What a session runs with: the project (the directory nox was run from, whose configuration it reads), the
    environment, and the session's name (the work dir's claim names it)."""

    project: Path
    environ: Mapping[str, str]
    name: str


@dataclass(frozen=True)
class PlanArgs:
    """A stage session's posargs: the configuration's options, and the variant its own options ask for
    (``train -- --shard NAME``, ``merge -- --gather DIR…``)."""

    config: tuple[str, ...]
    shard: str | None = None
    gather: tuple[str, ...] | None = None


ArgsT = TypeVar("ArgsT")
T = TypeVar("T")


@dataclass(frozen=True)
class Session(Generic[ArgsT]):
    """One session of the pipeline, declared whole: its name and line in ``nox -l``; ``parse``, its posargs into
    its arguments (a bad one is one :class:`~recipes.errors.ConfigError` line, before anything runs); ``run``, the
    session with them, which returns its summary lines (or yields them, each logged as it comes); ``records``,
    what it records in report.json (none: it writes files); ``tools``, what its plan must find before anything
    is built (:class:`PlanStage`; None: it makes no plan of a pipeline stage)."""

    name: str
    doc: str
    parse: Callable[[Sequence[str]], ArgsT]
    run: Callable[[Invocation, ArgsT], Iterable[str]]
    records: tuple[str, ...] = ()
    tools: PlanStage | None = None


def config_args(posargs: Sequence[str]) -> PlanArgs:
    """The posargs of a session that takes none of its own: all of them the configuration's."""
    return PlanArgs(tuple(posargs))


def train_args(posargs: Sequence[str]) -> PlanArgs:
    """``train``'s posargs: ``--shard NAME`` (one shard alone, for a later ``merge -- --gather``), the rest the
    configuration's."""
    shard, rest = gather.take_shard(posargs)
    return PlanArgs(tuple(rest), shard=shard)


def merge_args(posargs: Sequence[str]) -> PlanArgs:
    """``merge``'s posargs: ``--gather DIR…`` (the work dirs in which the shards were trained), the rest the
    configuration's."""
    folders, rest = take_gather(posargs)
    return PlanArgs(tuple(rest), gather=None if folders is None else tuple(folders))


def _held(at: Invocation, config_posargs: Sequence[str], stage: PlanStage, runs: Callable[[BuildPlan], T]) -> T:
    """``runs`` on the plan of the invocation's configuration, made with the tools ``stage`` needs, in the work
    dir it holds (one session, one crate), its children recorded."""
    config = load_config(at.project, at.environ, config_posargs)
    plan = make_plan(
        config, at.environ, instruments=stage.instruments(config), profdata=stage.profdata, bolt=stage.bolt(config)
    )
    with claim(plan.work, at.name) as held, children_recorded(plan.work):
        held.identify(CrateIdentity.of(plan.crate, plan.target, plan.config.features))
        return runs(plan)


def _plan_stage(name: str) -> Callable[[Invocation, PlanArgs], list[str]]:
    """The run of :data:`PLAN_STAGES`'s ``name``: its stage (or the variant the arguments ask for) run with the
    tools it needs (:func:`_held`), and the summary of the work dir's report."""
    stage = PLAN_STAGES[name]

    def run(at: Invocation, args: PlanArgs) -> list[str]:
        runs: Callable[[BuildPlan], object] = stage.run
        if args.shard is not None:
            runs = functools.partial(gather.train_shard, name=args.shard)
        if args.gather is not None:  # relative to where nox was run
            folders = [user_path(folder, at.project, "--gather") for folder in args.gather]
            runs = functools.partial(gather.merge_gathered, folders=folders)

        def summarised(plan: BuildPlan) -> list[str]:
            runs(plan)
            return [*summary_lines(report.load(plan.work)), f"report      {report.report_path(plan.work)}"]

        return _held(at, args.config, stage, summarised)

    return run


def _plain_build(plan: BuildPlan) -> PlainResult:
    return compared(plan, prefix="")  # its line as nox -s plain's: no "bench: "


#: the plain build's: cargo alone (no instrumented build, no llvm-profdata, no llvm-bolt)
_PLAIN = PlanStage(_plain_build, "the plain build")


def _plain(at: Invocation, args: PlanArgs) -> list[str]:
    result = _held(at, args.config, _PLAIN, _plain_build)
    return [
        f"plain       {result.seconds:8.1f} s  {result.binary}",
        f"sha256      {result.binary_sha256}",
        *c_code_lines(result.c_code, profiled=False),
    ]


def _cpu_baseline(at: Invocation, args: cpu.CpuArgs) -> list[str]:
    with children_recorded(load_config(at.project, at.environ).out):
        return cpu.summary_lines(cpu.cpu_baseline(at.project, at.environ, args))


# The release sessions: each parses its posargs with its own parser of recipes/release/args.py (a tag first,
# ``-- v1.2.3``, then its options; the rest are config options), and imports the recipes only it needs.


def _release_args(session: str) -> Callable[[Sequence[str]], Any]:
    """The parser of release session ``session`` (recipes/release/args.py), imported when it runs."""

    def parse(posargs: Sequence[str]) -> object:
        from recipes.release import args  # noqa: PLC0415  (only the release sessions need it)

        parser: Callable[[Sequence[str]], object] = getattr(args, f"parse_{session}")
        return parser(posargs)

    return parse


def _release(at: Invocation, args: ReleaseArgs) -> Iterator[str]:
    from recipes.release import make as release_recipe  # noqa: PLC0415
    from recipes.release import matrix  # noqa: PLC0415  (only the release sessions need them)

    if args.gather is not None:  # relative to where nox was run, as merge -- --gather's
        folders = [at.project / folder for folder in args.gather]  # parse_release read each (inputs.user_path)
        yield from matrix.gather(args.tag, folders, args.artefacts or at.project / "dist" / args.tag)
        return
    configs = matrix.target_configs(at.project, at.environ, args.config, args.targets)
    for manifest, out_dir in release_recipe.release_targets(args.tag, configs, at.environ, args.artefacts):
        yield from release_recipe.summary_lines(manifest, out_dir)  # each target's as it is done


def _rebuild(at: Invocation, args: RebuildArgs) -> list[str]:
    config = load_config(at.project, at.environ, args.config)
    return _rebuild_held(at, args.tag, config, args.artefacts, args.targets, args.base)


def _rebuild_held(
    at: Invocation, tag: str, config: Config, artefacts: Path | None, targets: Sequence[str], base: Base | None
) -> list[str]:
    """A release's rebuild: its files checked first, and the image's base (``--base``, the one the image records)
    (a refusal touches no work dir), then built in the work dir it holds (recipes/claim.py); then its image, when the
    release records one, made again from the rebuilt binaries. The lines of the summary."""
    from recipes.release import image as image_recipe  # noqa: PLC0415
    from recipes.release import rebuild as rebuild_recipe  # noqa: PLC0415

    checked = rebuild_recipe.rebuild_targets(tag, config, at.environ, artefacts, targets)
    image_recipe.rebuild_base(tag, checked[0].published.directory, base)
    with claim(config.out, at.name):
        results = rebuild_recipe.rebuild_checked(checked, config, at.environ)
        rebuilt = {target.published.manifest.triple: r.binary for target, r in zip(checked, results, strict=True)}
        work = WorkDir(WorkDir(config.out).rebuild(tag).absolute())
        directory = checked[0].published.directory
        lines = [line for result in results for line in result.lines]  # each artefact's match or mismatch
        return lines + image_recipe.rebuild_image(tag, directory, rebuilt, work, at.environ, base)


def _determinism(at: Invocation, args: DeterminismArgs) -> list[str]:
    from recipes.release import rebuild as rebuild_recipe  # noqa: PLC0415

    config = load_config(at.project, at.environ, args.config)
    with claim(config.out, at.name) as held:
        held.identify(identity_of_config(config, at.environ))
        result = rebuild_recipe.determinism(config, at.environ)
    return [f"identical: {result.binary_sha256[0]} ({' and '.join(result.binaries)})"]


def _verify(at: Invocation, args: VerifyArgs) -> Iterator[str]:
    from recipes.release import image as image_recipe  # noqa: PLC0415
    from recipes.release import provenance  # noqa: PLC0415

    config = load_config(at.project, at.environ, args.config)
    lines = provenance.verify_release(args.tag, config, at.environ, args.artefacts)
    lines[-1:-1] = image_recipe.verify_image(args.tag, config, at.environ, args.artefacts)
    yield from lines  # logged before the rebuild's long work
    if args.rebuild:
        yield from _rebuild_held(at, args.tag, config, args.artefacts, args.targets, args.base)


def _image(at: Invocation, args: ImageArgs) -> list[str]:
    from recipes.release import image as image_recipe  # noqa: PLC0415

    config = load_config(at.project, at.environ, args.config)
    return image_recipe.make_image(args.tag, config, at.environ, args.artefacts, args.source, args.base)


def _stage_session(
    name: str, parse: Callable[[Sequence[str]], PlanArgs] = config_args, *records: str
) -> Session[PlanArgs]:
    """The session of :data:`PLAN_STAGES`'s ``name``."""
    return Session(name, PLAN_STAGES[name].doc, parse, _plan_stage(name), records or (name,), PLAN_STAGES[name])


#: every session :func:`register_pgo_sessions` adds, in ``nox -l``'s order: the one table
SESSIONS: tuple[Session[Any], ...] = (
    _stage_session("instrument"),
    _stage_session("train", train_args),
    _stage_session("merge", merge_args),
    _stage_session("optimise"),
    _stage_session("bolt"),
    _stage_session("pgo", config_args, "instrument", "train", "merge", "optimise", "bolt"),
    _stage_session("pgo-test", config_args, "test"),
    Session(
        "plain",
        "The plain release build (no profile): the same cargo command, target, features and base rustflags as the "
        "PGO build, in <work>/plain-target; what bench compares with by default.",
        config_args, _plain, ("plain",),
    ),
    Session(
        "cpu-baseline",
        "The binary under an emulated SSE2-only CPU (qemu-user); posargs: [--binary PATH] [--run ARG...].",
        cpu.parse_cpu_args, _cpu_baseline, ("cpu_baseline",),
    ),
    Session(
        "release",
        "-- vX.Y.Z [--artefacts DIR] [--target T ...]: on a clean checkout of the tag, the plain and the PGO build, "
        "stripped, in dist/vX.Y.Z/ (each target's, several in one folder); -- vX.Y.Z --gather DIR [DIR ...] "
        "[--artefacts OUT]: per-target folders joined. Tarballs, the profile, a manifest and SHA256SUMS, all "
        "reproducible (SOURCE_DATE_EPOCH, remapped paths).",
        _release_args("release"), _release,
    ),
    Session(
        "rebuild",
        "-- vX.Y.Z [--artefacts DIR] [--target T ...] [--base DIR@sha256:D]: rebuild a release's PGO binary (of each "
        "target in the folder, or those given) from its profile and compare with SHA256SUMS; then its image, when "
        "the release records one, from the rebuilt binaries (on the same base, when it has one; the index digest "
        "compared).",
        _release_args("rebuild"), _rebuild, ("rebuild",),
    ),
    Session(
        "determinism",
        "Build HEAD twice from the profile alone (PGO_PROFDATA or the last merge) in two work dirs; compare.",
        _release_args("determinism"), _determinism, ("determinism",),
    ),
    Session(
        "verify",
        "-- vX.Y.Z [--artefacts DIR] [--rebuild [--target T ...]]: check a release's SHA256SUMS, manifest and "
        "provenance statements, and its image layout when ``nox -s image`` wrote one; with --rebuild, then rebuild "
        "its PGO binary (of the targets given) as ``rebuild`` does.",
        _release_args("verify"), _verify,
    ),
    Session(
        "image",
        "-- vX.Y.Z [--artefacts DIR] [--source URL] [--base DIR@sha256:D]: an OCI image layout of a release's static "
        "Linux PGO binaries (one image per platform, FROM scratch, in one image index), and with --base its glibc "
        "ones on that base image (an OCI layout, by digest), written into the release's folder after verify's "
        "checks.",
        _release_args("image"), _image,
    ),
)  # fmt: skip

#: the sessions :func:`register_pgo_sessions` adds, by name
PGO_SESSIONS = tuple(declared.name for declared in SESSIONS)


def session_function(declared: Session[Any]) -> Callable[[nox.Session], None]:
    """``declared`` as nox's session function: its posargs parsed, then run in the directory nox was run from,
    its summary through nox's log; :func:`guarded`, the one place a known failure becomes nox's."""

    def session_of(session: nox.Session) -> None:
        # a relative path among the session's own options (--artefacts, --base, --binary) is the project's, as the
        # configuration's are: nox runs the session in the noxfile's folder, which is pgo-recipes' under nox -f
        with chdir(project_dir(session)):
            args = declared.parse(session.posargs)
        # its last word, a line at a time, through nox's log (progress went through runner.say)
        for line in declared.run(Invocation(project_dir(session), os.environ, declared.name), args):
            session.log(line)

    session_of.__name__ = declared.name.replace("-", "_")
    session_of.__doc__ = declared.doc
    return guarded(session_of)


def register_pgo_sessions() -> None:
    """Register the pipeline's sessions (:data:`SESSIONS`) with nox; call it once from a noxfile.

    None of them needs a virtualenv: they run in nox's own interpreter, where pgo-recipes is installed. ``pgo``
    is the only default session (``nox`` alone runs it, unless the noxfile sets ``nox.options.sessions``).
    """
    for declared in SESSIONS:
        nox.session(name=declared.name, venv_backend="none", default=declared.name == "pgo")(session_function(declared))
