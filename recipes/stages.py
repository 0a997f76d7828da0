"""The four stages and the whole pipeline. Each stage reads what the previous one left in the work dir."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recipes import cargo, cpu, elf, preflight, profdata, report, testsuite, zig
from recipes.config import Config
from recipes.errors import CheckFailed, MissingInput, PgoError, StoreError
from recipes.runner import run, say
from recipes.rustflags import RustflagsPlan, env_with_rustflags, plan_rustflags, refuse_global_rustflags, rust_triple
from recipes.store import ProfileStore, sha256_file
from recipes.toolchain import RustcInfo, find_profdata, rustc_info, rustc_sysroot
from recipes.train.runner import run_workload
from recipes.workload import Workload, check_tools, load_workload, workload_path


@dataclass(frozen=True)
class BuildPlan:
    """Everything the stages share, worked out once from the configuration and the toolchain."""

    config: Config
    env: dict[str, str]
    rustc: RustcInfo
    target: str
    crate: cargo.CrateInfo
    rustflags: RustflagsPlan

    @property
    def triple(self) -> str:
        return rust_triple(self.target)

    @property
    def work(self) -> Path:
        return self.config.out

    @property
    def logs(self) -> Path:
        return self.work / "logs"

    @property
    def profraw_dir(self) -> Path:
        return self.work / "profraw"

    @property
    def generate_dir(self) -> Path:
        return self.work / "generate-target"

    @property
    def merged_profile(self) -> Path:
        return self.work / f"{self.crate.bin}.profdata"

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
        return cargo.build_argv(
            self.config.cargo,
            crate=self.crate,
            target=self.target,
            features=self.config.features,
            locked=self.config.locked,
            target_dir=target_dir,
            verbose=verbose,
        )

    def workload(self) -> Workload:
        """The configured workload (default: ``profiles/<bin>.toml``); a missing file is an error."""
        name = self.config.workload or self.crate.bin
        return load_workload(workload_path(self.config.project_dir, name))

    def workload_if_any(self) -> Workload | None:
        """The workload when one is configured or the default file exists (for its floors and ceilings)."""
        if self.config.workload is None and not workload_path(self.config.project_dir, self.crate.bin).is_file():
            return None
        return self.workload()


def make_plan(config: Config, environ: Mapping[str, str]) -> BuildPlan:
    refuse_global_rustflags(environ)
    env = cargo.cargo_env(environ)
    info = rustc_info(env)
    crate = cargo.crate_info(config.manifest, config.package, config.bin, env)
    target = config.target or info.host
    preflight.check(config, env, target)
    if zig.uses_zigbuild(config.cargo):
        env = zig.ensure_zigbuild(env, logs=config.out / "logs")
    flags = plan_rustflags(target, config.manifest.parent, env)
    return BuildPlan(config, env, info, target, crate, flags)


def _clean_package(plan: BuildPlan, target_dir: Path | None, log: Path) -> None:
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


def _timed(start: float) -> float:
    return round(time.monotonic() - start, 3)


def instrument(plan: BuildPlan) -> dict[str, Any]:
    """The instrumented build: -Cprofile-generate, its own target dir, the same cargo command."""
    start = time.monotonic()
    say(f"instrument: {plan.crate.package} ({plan.crate.bin}) for {plan.target}")
    zig.check_generate_linker(plan.config.cargo, plan.config.generate_linker)
    flags = [f"-Cprofile-generate={plan.profraw_dir}"]
    if plan.config.generate_linker:
        flags.append(f"-Clinker={plan.config.generate_linker}")
    env = env_with_rustflags(plan.env, plan.rustflags, flags)
    _clean_package(plan, plan.generate_dir, plan.logs / "instrument-clean.log")
    argv = plan.build_argv(plan.generate_dir)
    done = run(argv, env=env, log=plan.logs / "instrument-build.log", cwd=plan.cwd, what="the instrumented build")
    identities = cargo.crate_identities(done.output(), plan.crate)
    binary = plan.instrumented_binary
    if not binary.is_file():
        raise MissingInput(f"the instrumented build left no binary at {binary}", f"see {done.log}")
    result = {
        "seconds": _timed(start),
        "binary": str(binary),
        "binary_sha256": sha256_file(binary),
        "crate_metadata": identities,
        "cargo_command": list(plan.config.cargo),
        "target": plan.target,
        "rustflags_var": plan.rustflags.var,
        "rustflags": env[plan.rustflags.var],
        "carried_rustflags_from": list(plan.rustflags.carried_from),
        "rustc": plan.rustc.release,
        **({"zigbuild": zig.versions(plan.env)} if zig.uses_zigbuild(plan.config.cargo) else {}),
    }
    report.record(plan.work, "instrument", result)
    return result


def train(plan: BuildPlan) -> dict[str, Any]:
    """Drive the instrumented binary through the workload; each instance writes its .profraw."""
    inst = report.require(plan.work, "instrument", "train")
    binary = Path(inst["binary"])
    if not binary.is_file():
        raise MissingInput(f"the instrumented binary {binary} is gone", "run `nox -s instrument` again")
    workload = plan.workload()
    check_tools(workload, plan.env.get("PATH", os.defpath))
    result = run_workload(
        workload,
        binary=binary,
        base_env=plan.env,
        work=plan.work,
        logs=plan.logs,
        project_dir=plan.config.project_dir,
        scale=plan.config.train_scale,
        timeout=plan.config.phase_timeout,
        profraw_dir=plan.profraw_dir,
    )
    report.record(plan.work, "train", result)
    return result


def min_functions(plan: BuildPlan, workload: Workload | None) -> int:
    if plan.config.min_functions is not None:
        return plan.config.min_functions
    if workload is not None and workload.min_functions is not None:
        return workload.min_functions
    return 1


def max_missing(plan: BuildPlan, workload: Workload | None) -> int | None:
    if plan.config.max_missing is not None:
        return plan.config.max_missing
    return workload.max_missing if workload is not None else None


def merge(plan: BuildPlan) -> dict[str, Any]:
    """Merge the raw profiles with rustc's own LLVM's llvm-profdata; count the functions executed."""
    start = time.monotonic()
    report.require(plan.work, "train", "merge")
    tool = find_profdata(plan.rustc, rustc_sysroot(plan.env), plan.env, plan.config.llvm_profdata)
    say(f"merge: {tool.path} (LLVM {tool.llvm_version})")
    profdata.merge(tool, plan.profraw_dir, plan.merged_profile, env=plan.env, log=plan.logs / "merge.log")
    summary = profdata.summarise(tool, plan.merged_profile, env=plan.env, log=plan.logs / "merge-show.log")
    floor = min_functions(plan, plan.workload())
    result = {
        "seconds": _timed(start),
        "profile": str(plan.merged_profile),
        "profile_sha256": sha256_file(plan.merged_profile),
        "executed_functions": summary.executed_functions,
        "total_functions": summary.total_functions,
        "min_functions": floor,
        "llvm_profdata": str(tool.path),
        "llvm_profdata_version": tool.llvm_version,
    }
    if summary.executed_functions < floor:
        plan.merged_profile.unlink(missing_ok=True)
        report.record(plan.work, "merge", {**result, "failed": "min_functions"})
        raise CheckFailed(
            f"the training executed {summary.executed_functions} of {summary.total_functions} functions, "
            f"fewer than PGO_MIN_FUNCTIONS={floor}",
            "the workload does not reach the code: extend it, or lower the floor if the code shrank",
        )
    report.record(plan.work, "merge", result)
    return result


def _profile_to_use(plan: BuildPlan) -> tuple[Path, bool]:
    """The profile of the optimised build, and whether it came from this work dir's training."""
    if plan.config.profdata is not None:
        if not plan.config.profdata.is_file():
            raise MissingInput(f"PGO_PROFDATA={plan.config.profdata}: no such file", "give the path of a .profdata")
        return plan.config.profdata, False
    merged = report.require(plan.work, "merge", "optimise")
    if "failed" in merged:
        raise MissingInput("the last merge failed its checks", "run `nox -s merge` again after fixing the training")
    path = Path(merged["profile"])
    if not path.is_file():
        raise MissingInput(f"the merged profile {path} is gone", "run `nox -s merge` again")
    if sha256_file(path) != merged["profile_sha256"]:
        raise StoreError(f"{path} changed since merge wrote it", "run `nox -s merge` again")
    return path, True


def optimise(plan: BuildPlan, *, verify: bool | None = None) -> dict[str, Any]:
    """The optimised build from the store, then every check of the result."""
    start = time.monotonic()
    profile, trained_here = _profile_to_use(plan)
    store = plan.store
    store_path = store.put(profile)
    sha = store.verify(store_path, "before the build")
    say(f"optimise: profile {store_path}")
    flags = [f"-Cprofile-use={store_path}", "-Cllvm-args=-pgo-warn-missing-function"]
    env = env_with_rustflags(plan.env, plan.rustflags, flags)
    _clean_package(plan, None, plan.logs / "optimise-clean.log")
    done = run(
        plan.build_argv(None, verbose="-vv"),
        env=cargo.with_lint_wrapper(env, plan.work / "bin"),
        log=plan.logs / "optimise-build.log",
        cwd=plan.cwd,
        what="the optimised build",
    )
    log_text = done.output()
    binary = plan.optimised_binary
    if not binary.is_file():
        raise MissingInput(f"the optimised build left no binary at {binary}", f"see {done.log}")
    warnings = cargo.profile_warnings(log_text)
    result: dict[str, Any] = {
        "store_path": str(store_path),
        "profile_sha256": sha,
        "missing_profile_functions": warnings.missing,
        "missing_by_crate": dict(sorted(warnings.missing_by_crate.items(), key=lambda kv: -kv[1])),
        "stale_profile_warnings": warnings.stale,
        "crate_metadata": cargo.crate_identities(log_text, plan.crate),
        "cargo_command": list(plan.config.cargo),
        "target": plan.target,
        "rustflags": env[plan.rustflags.var],
        "binary": str(binary),
        "binary_sha256": sha256_file(binary),
        "max_glibc": elf.max_glibc(binary),
        "target_cpu": cpu.target_cpu_warning(plan.rustflags),
        **({"zigbuild": zig.versions(plan.env)} if zig.uses_zigbuild(plan.config.cargo) else {}),
    }
    try:
        store.verify(store_path, "after the build")
        workload = plan.workload_if_any()
        _check_optimised(plan, result, log_text, store_path, warnings, workload, trained_here)
        if verify if verify is not None else bool(plan.config.verify):
            workload = workload or plan.workload()
            say(f"verify: the optimised binary runs the workload {workload.path.name}")
            result["verify"] = run_workload(
                workload,
                binary=binary,
                base_env=plan.env,
                work=plan.work,
                logs=plan.logs / "verify",
                project_dir=plan.config.project_dir,
                scale=plan.config.train_scale,
                timeout=plan.config.phase_timeout,
                profraw_dir=None,
            )
    except PgoError as error:
        result["failed"] = error.line()
        result["seconds"] = _timed(start)
        result["binary"] = str(_reject(plan, binary))
        report.record(plan.work, "optimise", result)
        raise
    result["seconds"] = _timed(start)
    report.record(plan.work, "optimise", result)
    return result


def _reject(plan: BuildPlan, binary: Path) -> Path:
    """Move a binary that failed its checks out of the target dir, so that nobody ships it by mistake."""
    rejected = plan.work / "rejected" / binary.name
    rejected.parent.mkdir(parents=True, exist_ok=True)
    os.replace(binary, rejected)
    say(f"the optimised binary failed its checks: moved to {rejected}")
    return rejected


def check_same_build(recorded: Mapping[str, Any], plan: BuildPlan, *, earlier: str, now: str) -> None:
    """Refuse to go on from ``recorded`` (a stage's report) with another cargo command or target."""
    if recorded.get("cargo_command") != list(plan.config.cargo):
        raise CheckFailed(
            f"{earlier} was made by {' '.join(recorded.get('cargo_command', ['?']))!r} and {now} by "
            f"{' '.join(plan.config.cargo)!r}",
            "both must use the same PGO_CARGO: run every stage with one",
        )
    if recorded.get("target") != plan.target:
        raise CheckFailed(
            f"{earlier} was for {recorded.get('target')} and {now} for {plan.target}",
            "use the same PGO_TARGET for every stage",
        )


def _check_optimised(
    plan: BuildPlan,
    result: dict[str, Any],
    log_text: str,
    store_path: Path,
    warnings: cargo.ProfileWarnings,
    workload: Workload | None,
    trained_here: bool,
) -> None:
    if warnings.stale:
        raise CheckFailed(
            f"the optimised build reports {warnings.stale} stale-profile warnings (hash mismatch), first: "
            f"{warnings.stale_examples[0]}",
            "the profile is of another source or compiler: train again on this tree",
        )
    ceiling = max_missing(plan, workload)
    if ceiling is not None and warnings.missing > ceiling:
        top = ", ".join(f"{crate} {count}" for crate, count in list(result["missing_by_crate"].items())[:3])
        raise CheckFailed(
            f"{warnings.missing} functions have no profile data, more than PGO_MAX_MISSING={ceiling} (most in: {top})",
            "the profile matches little of this build: same cargo command, features and target as the training?",
        )
    for call in cargo.main_crate_calls(log_text, plan.crate):
        used = call.codegen("profile-use")
        if used != str(store_path):
            raise CheckFailed(
                f"crate {call.crate_name} was compiled with profile-use={used!r}, not {store_path}",
                f"the main crate must be compiled with the profile; see {plan.logs / 'optimise-build.log'}",
            )
    if not cargo.main_crate_calls(log_text, plan.crate):
        raise CheckFailed(
            f"the optimised build's log has no rustc line of {plan.crate.package}: not compiled with the profile",
            "this is a bug: the package is cleaned before the build",
        )
    if trained_here:
        inst = report.load(plan.work).get("instrument", {})
        check_same_build(inst, plan, earlier="the instrumented build", now="this one")
        if inst.get("crate_metadata") != result["crate_metadata"]:
            raise CheckFailed(
                f"the crate identity differs between the builds: instrumented {inst.get('crate_metadata')} "
                f"optimised {result['crate_metadata']}",
                "the profile's function names will not match: build both with the same cargo command and config",
            )
    if plan.config.max_glibc:
        elf.check_glibc(Path(result["binary"]), plan.config.max_glibc)


def pgo(plan: BuildPlan) -> dict[str, Any]:
    """All four stages in order, every check on (the optimised binary replays the training)."""
    if plan.config.profdata is None:
        check_tools(plan.workload(), plan.env.get("PATH", os.defpath))  # refused before anything is built
        instrument(plan)
        train(plan)
        merge(plan)
        verify = plan.config.verify if plan.config.verify is not None else True
    else:
        verify = bool(plan.config.verify)
    optimise(plan, verify=verify)
    if plan.config.test:
        test(plan)
    return report.load(plan.work)


def test(plan: BuildPlan) -> dict[str, Any]:
    """The crate's test suite compiled with the optimised build's profile and flags (PGO_TEST=1)."""
    return testsuite.run_test_stage(plan, clean=_clean_package, reject=_reject)


def summary_lines(full: dict[str, Any]) -> list[str]:
    """The short summary printed at the end of a session."""
    lines = []
    if "instrument" in full:
        lines.append(f"instrument  {full['instrument']['seconds']:8.1f} s  {full['instrument']['binary']}")
    if "train" in full:
        t = full["train"]
        lines.append(
            f"train       {t['seconds']:8.1f} s  {t['requests']} requests/runs in {len(t['phases'])} phases, "
            f"{t.get('profraw_files', 0)} .profraw files"
        )
    if "merge" in full:
        m = full["merge"]
        lines.append(
            f"merge       {m['seconds']:8.1f} s  {m['executed_functions']} of {m['total_functions']} "
            f"functions executed (floor {m['min_functions']})"
        )
    if "optimise" in full:
        o = full["optimise"]
        lines.append(
            f"optimise    {o.get('seconds', 0):8.1f} s  {o['missing_profile_functions']} functions without "
            f"profile, {o['stale_profile_warnings']} stale; glibc {o['max_glibc'] or 'none'}"
        )
        lines.append(f"binary      {o['binary']}")
        lines.append(f"            sha256 {o['binary_sha256']}")
        lines.append(f"profile     {o['store_path']}")
        if "verify" in o:
            lines.append(
                f"verify      {o['verify']['seconds']:8.1f} s  the optimised binary ran the workload "
                f"({o['verify']['requests']} requests/runs)"
            )
        if o.get("target_cpu"):
            lines.append(f"warning     the flags set target-cpu={o['target_cpu']}: not a baseline release build")
    if "test" in full:
        t = full["test"]
        counts = f"{t['passed']} passed, {t['failed']} failed, {t['ignored']} ignored"
        lines.append(f"test        {t['seconds']:8.1f} s  {counts} (the suite built with the profile)")
    return lines
