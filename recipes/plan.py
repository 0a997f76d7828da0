"""The plan every stage shares: the configuration, the toolchain, the crate, the target and the rustflags,
and the workload, worked out once (``make_plan``), and what every stage does with it (the package clean)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from recipes import claim, train
from recipes.config import TESTS_SHARD, Config
from recipes.errors import ConfigError
from recipes.runner import run
from recipes.store import ProfileStore
from recipes.toolchain import cflags, emulation, preflight, zig
from recipes.toolchain.cargo import invocation as cargo_command
from recipes.toolchain.cargo.metadata import CrateInfo, build_script_packages, c_packages, crate_info
from recipes.toolchain.rustc import ResolvedRustc, RustcInfo, resolve_rustc, split_toolchain
from recipes.toolchain.rustflags import (
    RustflagsPlan,
    cargo_config_files,
    plan_rustflags,
    refuse_global_rustflags,
    rust_triple,
)
from recipes.workdir import WorkDir
from recipes.workload import Workload, load_workload, no_workload_file, workload_path
from recipes.workload.shards import Shard, plan_shards

_ = train  # imported for its registrations: the instance modes and phase kinds a workload file names


@dataclass(frozen=True)
class BuildPlan:
    """Everything the stages share, worked out once from the configuration and the toolchain."""

    config: Config
    env: dict[str, str]
    rustc: RustcInfo
    target: str
    crate: CrateInfo
    rustflags: RustflagsPlan
    c: cflags.CPlan
    #: the workload, parsed when the plan was made: the configured one, else ``profiles/<bin>.toml`` when it exists
    #: (for its floors and ceilings), else None
    workload: Workload | None
    #: the rustc cargo builds with in the crate's directory (``env["RUSTC"]``), and how it was chosen
    compiler: ResolvedRustc | None = None
    #: the shards (recipes/workload/shards.py) when the workload is several; empty for one workload (then ``workload``)
    shards: tuple[Shard, ...] = ()

    @property
    def rustc_path(self) -> Path:
        return self.compiler.path if self.compiler is not None else Path(self.env.get("RUSTC", "rustc"))

    @property
    def rustc_source(self) -> str:
        return self.compiler.source if self.compiler is not None else "default"

    @property
    def triple(self) -> str:
        return rust_triple(self.target)

    @property
    def launcher(self) -> tuple[str, ...]:
        """What runs the built binary: qemu-user for a target of another architecture, else nothing."""
        return emulation.launcher(self.triple, self.env)

    @property
    def work(self) -> Path:
        """The work dir (``PGO_OUT``) itself: what report.json's functions take."""
        return self.config.out

    @property
    def workdir(self) -> WorkDir:
        """Every path under the work dir, by name."""
        return WorkDir(self.config.out)

    @property
    def logs(self) -> Path:
        return self.workdir.logs

    @property
    def profraw_dir(self) -> Path:
        return self.workdir.profraw

    @property
    def generate_dir(self) -> Path:
        return self.workdir.generate_target

    @property
    def merged_profile(self) -> Path:
        return self.workdir.profdata(self.crate.bin)

    @property
    def store(self) -> ProfileStore:
        return ProfileStore(self.config.store or Path("/tmp") / f"{self.crate.bin}-pgo")

    @property
    def cwd(self) -> Path:
        """Cargo runs in the crate's directory, so it reads the crate's .cargo/config.toml."""
        return self.crate.manifest.parent

    def binary(self, target_dir: Path) -> Path:
        return target_dir / self.triple / "release" / self.crate.bin

    @property
    def optimised_binary(self) -> Path:
        return self.binary(self.crate.target_directory)

    @property
    def instrumented_binary(self) -> Path:
        return self.binary(self.generate_dir)

    def build_argv(self, target_dir: Path | None, verbose: str = "-v") -> list[str]:
        return cargo_command.build_argv(
            self.config.cargo,
            crate=self.crate,
            target=self.target,
            features=self.config.features,
            locked=self.config.locked,
            target_dir=target_dir,
            verbose=verbose,
        )

    def require_workload(self) -> Workload:
        """The workload, for a stage that runs it or reads its floor: without one, the refusal of the missing
        default file (``profiles/<bin>.toml``)."""
        if self.workload is None:
            raise no_workload_file(workload_path(self.config.project_dir, self.crate.bin))
        return self.workload


def plan_workload(config: Config, bin_name: str) -> Workload | None:
    """The configured workload (a missing file is refused), else ``profiles/<bin>.toml`` when it exists, else
    None; parsed once, so a bad file is refused before anything is built."""
    if config.shards:  # the first shard with a workload file (the tests shard has none)
        return next(s.workload for s in plan_shards(config) if s.workload is not None)
    if config.workload is None and not workload_path(config.project_dir, bin_name).is_file():
        return None
    return load_workload(workload_path(config.project_dir, config.workload or bin_name))


def make_plan(
    config: Config,
    environ: Mapping[str, str],
    *,
    instruments: bool = True,
    profdata: bool = True,
    bolt: bool | None = None,
    workload: Workload | None = None,
) -> BuildPlan:
    """The plan of every stage; ``instruments``: it will build the instrumented binary, ``profdata``: it will run
    llvm-profdata, ``bolt``: llvm-bolt and merge-fdata (None: when ``PGO_BOLT`` is on). What they need is checked
    before anything is installed or built. ``workload``: the plan's workload, parsed already (the bench reads it
    before it plans), not parsed again."""
    refuse_global_rustflags(environ)
    base = cargo_command.cargo_env(environ)
    compiler, env = plan_rustc(config, config.manifest.parent, base)
    crate = crate_info(config.manifest, config.package, config.bin, env)
    if crate.manifest.parent != config.manifest.parent:  # a workspace's member: cargo runs in its directory
        compiler, env = plan_rustc(config, crate.manifest.parent, base)
    info = compiler.info
    target = config.target or info.host
    triple = rust_triple(target)
    zigbuild = zig.uses_zigbuild(config.cargo)
    bolt = config.bolt if bolt is None else bolt
    preflight.check(config, env, target, bin_name=crate.bin, instruments=instruments)
    preflight.check_bolt_target(target, bolt=bolt)
    preflight.check_tools(config, env, info, profdata=profdata, bolt_tools=bolt)
    workload = workload if workload is not None else plan_workload(config, crate.bin)
    shards = plan_shards(config)
    refuse_tests_without_reach(shards, crate)
    if zigbuild:
        claim.prepare(WorkDir(config.out))  # its install log is the first thing written there
        env = zig.ensure_zigbuild(env, logs=WorkDir(config.out).logs)
    configs = cargo_config_files(config.manifest.parent, env)  # read once: the flags and the cross linker
    flags = plan_rustflags(target, config.manifest.parent, env, configs)
    preflight.check_rustflags(flags, triple, env, config.manifest.parent)
    env = emulation.cross_env(triple, env, [c.data for c in configs], zig_links=zigbuild)
    c_plan = cflags.plan_c(
        info,
        env,
        triple,
        setting=config.c,
        cxx=config.cxx,
        clang=config.clang,
        zigbuild=zigbuild,
        cwd=config.manifest.parent,
        cargo_configs=configs,
    )
    if cflags.missing_clang(c_plan) and not zigbuild:  # said before the build: the C that will stay unprofiled
        c_plan = replace(
            c_plan,
            before=cflags.missing_clang_line(c_plan, c_packages(config.manifest, triple, env, locked=config.locked)),
        )
    if isinstance(config.c, tuple) or isinstance(config.cxx, tuple):
        packages, scripts = build_script_packages(config.manifest, triple, env, locked=config.locked)
        cflags.refuse_unknown_packages({"PGO_C": config.c, "PGO_CXX": config.cxx}, packages, scripts)
    return BuildPlan(config, env, info, target, crate, flags, c_plan, workload, compiler, shards)


def refuse_tests_without_reach(shards: Sequence[Shard], crate: CrateInfo) -> None:
    """The tests shard trains the binary only through tests that run it or call its library as it has it: an
    integration test (or an example or bench with ``test = true``). A package whose tests are unit tests alone (its
    lib's and bins', compiled again as test crates, their functions named apart from the binary's) would train for
    nothing, refused by the merge after the instrumented build and the training; here ``cargo metadata`` says so
    before anything is built."""
    if not any(shard.is_tests for shard in shards) or crate.linking_tests:
        return
    raise ConfigError(
        f"the shard {TESTS_SHARD} cannot train the binary: {crate.package} has no integration test (tests/*.rs), "
        "and its unit tests (of its lib and bins, each compiled again as a test crate) never run the binary "
        "nor call the code it ships",
        f"add an integration test that runs the binary (CARGO_BIN_EXE_{crate.bin}) or calls its library, "
        f"or drop {TESTS_SHARD} from PGO_WORKLOAD",
    )


def plan_rustc(config: Config, cwd: Path, env: Mapping[str, str]) -> tuple[ResolvedRustc, dict[str, str]]:
    """The rustc cargo builds with in ``cwd``, before anything is built, and the environment that holds it."""
    plus, _ = split_toolchain(config.cargo)
    return resolve_rustc(cwd, env, cargo_config_files(cwd, env), plus)


def clean_package(plan: BuildPlan, target_dir: Path | None, log: Path) -> None:
    """Remove the package's own build output, so its rustc line is always in the build log."""
    argv = [
        "cargo",
        "clean",
        "--release",
        "--target",
        plan.triple,
        "--manifest-path",
        str(plan.crate.manifest),
        "-p",
        plan.crate.package,
    ]
    if target_dir is not None:
        argv += ["--target-dir", str(target_dir)]
    run(argv, env=plan.env, log=log, cwd=plan.cwd, what="cargo clean")
