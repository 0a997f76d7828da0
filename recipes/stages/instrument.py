"""The instrumented build: ``-Cprofile-generate``, its own target dir, the same cargo command as the others."""

from __future__ import annotations

from recipes.errors import CommandFailed, MissingInput
from recipes.plan import BuildPlan, clean_package
from recipes.results import InstrumentResult
from recipes.runner import run, say
from recipes.stages import _observe
from recipes.stages.frame import StageFrame
from recipes.store import sha256_file
from recipes.toolchain import cflags, zig
from recipes.toolchain.cargo import log as cargo_log
from recipes.toolchain.rustflags import env_with_rustflags


def instrument(plan: BuildPlan) -> InstrumentResult:
    """The instrumented build: -Cprofile-generate, its own target dir, the same cargo command."""
    with StageFrame(plan, "instrument") as frame:
        say(f"instrument: {plan.crate.package} ({plan.crate.bin}) for {plan.target}")
        env = instrumented_env(plan)
        c_flag = generate_c_flag(plan)
        for line in (cflags.cross_line(plan.c, plan.rustc), cflags.choice_line(plan.c), plan.c.before):
            if line:
                say(line)
        clean_package(plan, plan.generate_dir, plan.logs / "instrument-clean.log")
        argv = plan.build_argv(plan.generate_dir)
        env = _observe.observing(plan, env, "instrument")
        log = plan.logs / "instrument-build.log"
        try:
            done = run(argv, env=env, log=log, cwd=plan.cwd, what="the instrumented build")
        except CommandFailed:
            cflags.refuse_clang_cannot_build(plan.c, log)
            raise
        _observe.check_profile_flag(
            plan, "instrument", "the instrumented build", option="profile-generate", value=str(plan.profraw_dir)
        )
        identities = cargo_log.crate_identities(done.output(), plan.crate)
        binary = plan.instrumented_binary
        if not binary.is_file():
            raise MissingInput(f"the instrumented build left no binary at {binary}", f"see {done.log}")
        crates = cflags.c_crates(plan.c, plan.rustc, plan.generate_dir, log_text=done.output(), flag=c_flag)
        if line := cflags.unprofiled_warning(crates, plan.c):
            say(line)
        result = InstrumentResult(
            seconds=0.0,  # the frame's
            binary=binary,
            binary_sha256=sha256_file(binary),
            crate_metadata=identities,
            cargo_command=list(plan.config.cargo),
            target=plan.target,
            rustflags_var=plan.rustflags.var,
            rustflags=env[plan.rustflags.var],
            carried_rustflags_from=list(plan.rustflags.carried_from),
            rustc=plan.rustc.release,
            zigbuild=zig.versions(plan.env) if zig.uses_zigbuild(plan.config.cargo) else None,
            c_code=plan.c.record(crates),
            rustc_llvm=plan.rustc.llvm_version,
            rustc_path=str(plan.rustc_path),
            rustc_source=plan.rustc_source,
        )
        return frame.done(result)


def generate_c_flag(plan: BuildPlan) -> str:
    return f"-fprofile-generate={plan.profraw_dir}"


def instrumented_env(plan: BuildPlan) -> dict[str, str]:
    """The instrumented build's environment: the per-target rustflags with ``-Cprofile-generate`` (and the generate
    linker), the C compilers' ``-fprofile-generate``. The tests shard builds the crate's tests with it too
    (recipes/stages/tests_shard.py)."""
    # cargo zigbuild's generate linker was checked when the plan was made (preflight.check, instruments=True)
    flags = [f"-Cprofile-generate={plan.profraw_dir}"]
    if plan.config.generate_linker:
        flags.append(f"-Clinker={plan.config.generate_linker}")
    env = env_with_rustflags(plan.env, plan.rustflags, flags)
    return cflags.c_env(plan.c, env, [generate_c_flag(plan)], plan.workdir.bin, optimise=False)
