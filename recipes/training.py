"""Run a workload's instances and phases against a binary; check every instance wrote a profile.

The runner sits above what it runs: the workload (:mod:`recipes.workload`: the file, the registry) is at the
bottom, the instance modes, phase kinds and resources (:mod:`recipes.train`) register into it, and this module
drives them; the stages and the bench call it.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path

from recipes import (
    emulation,
    train,  # noqa: F401  (registers the instance modes, phase kinds and resources it drives)
)
from recipes.errors import TrainingFailed
from recipes.results import WorkloadRun
from recipes.runner import say
from recipes.workdir import WorkDir
from recipes.workload import Workload
from recipes.workload.registry import INSTANCE_MODES, RESOURCES, PhaseContext, PhaseResult, ResourceContext

DEFAULT_PHASE_TIMEOUT = 300.0


def profraw_pattern(profraw_dir: Path, instance: str) -> str:
    """``LLVM_PROFILE_FILE``: one file per binary signature (%m) and process (%p)."""
    return str(profraw_dir / f"{instance}-%m-%p.profraw")


def run_workload(
    workload: Workload,
    *,
    binary: Path,
    base_env: Mapping[str, str],
    work: Path,
    logs: Path,
    project_dir: Path,
    scale: float,
    timeout: float | None,
    profraw_dir: Path | None,
    crate_dir: Path | None = None,
    fdata_dir: Path | None = None,
    scratch_name: str | None = None,
    launcher: tuple[str, ...] = (),
) -> WorkloadRun:
    """Drive ``binary`` through the workload. With ``profraw_dir`` (training) the profiles are collected
    there, emptied first; without it (verifying the optimised binary) none is expected. With ``fdata_dir`` (a
    BOLT-instrumented binary, which writes where its instrumentation says) every instance must add a ``.fdata``
    file there. ``launcher``: what runs the binary (qemu-user for another architecture: ``recipes.emulation``),
    whose slowdown multiplies the workload's own time limits. ``scratch_name``: the folder of the work dir the
    phases may use (default: train or verify)."""
    verifying = profraw_dir is None and fdata_dir is None
    if profraw_dir is not None:
        shutil.rmtree(profraw_dir, ignore_errors=True)
        profraw_dir.mkdir(parents=True)
    scratch = WorkDir(work).scratch(scratch_name or ("verify" if verifying else "train"))
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    logs.mkdir(parents=True, exist_ok=True)
    phase_timeout = timeout or workload.phase_timeout or DEFAULT_PHASE_TIMEOUT
    results: list[PhaseResult] = []
    started = time.monotonic()
    common = {
        "work": str(scratch),
        "workload_dir": str(workload.path.parent),
        "project": str(project_dir),
        "crate": str(crate_dir or project_dir),  # the crate's package dir: its sources, a corpus for a tool
    }
    with ExitStack() as setup:
        shared: dict[str, str] = {}
        handles = {}
        for kind, options in workload.resources:
            say(f"setup: {kind}")
            live = setup.enter_context(
                RESOURCES[kind].start(options, ResourceContext(scratch / "setup", logs, dict(base_env)))
            )
            shared.update(live.values)
            handles[kind] = live.handle
        for instance in workload.instances:
            values = {**common, **shared}
            env = dict(base_env)
            env.update({k: v.format_map(values) for k, v in instance.env.items()})
            env.pop("LLVM_PROFILE_FILE", None)
            if profraw_dir is not None:
                env["LLVM_PROFILE_FILE"] = profraw_pattern(profraw_dir, instance.name)
            ctx = PhaseContext(
                binary=binary,
                instance=instance.name,
                env=env,
                values=values,
                logs=logs,
                scale=scale,
                timeout=phase_timeout,
                verifying=verifying,
                resources=handles,
                timeout_override=timeout,
                launcher=launcher,
                slowdown=emulation.slowdown(launcher),
            )
            mode = INSTANCE_MODES[instance.mode]
            before = set(fdata_dir.glob("*.fdata")) if fdata_dir is not None else set()
            say(f"instance {instance.name} ({instance.mode}): {len(instance.phases)} phases")
            with mode.session(instance.options, ctx) as live_ctx:
                for phase in instance.phases:
                    _check_phase_files(phase.files(), live_ctx.values, f"{instance.name}/{phase.name}")
                    result = phase.run(live_ctx)
                    say(
                        f"phase {instance.name}/{phase.name}: {result.done}/{result.requests} in "
                        f"{result.seconds:.1f} s {result.status or ''}"
                    )
                    results.append(result)
            if profraw_dir is not None:
                written = sorted(profraw_dir.glob(f"{instance.name}-*.profraw"))
                if not written:
                    raise TrainingFailed(
                        f"instance {instance.name} wrote no .profraw into {profraw_dir}",
                        "is the binary instrumented, and does it exit normally (not by a signal or abort)?",
                    )
            if fdata_dir is not None and not set(fdata_dir.glob("*.fdata")) - before:
                raise TrainingFailed(
                    f"instance {instance.name} of the BOLT-instrumented binary wrote no .fdata into {fdata_dir}",
                    "BOLT's runtime writes the profile at a normal exit (not by a signal or abort)",
                )
    return WorkloadRun(
        seconds=round(time.monotonic() - started, 3),
        requests=sum(r.requests for r in results),
        phases=[r.as_json() for r in results],
        scale=scale,
        workload=workload.path,
        profraw_files=len(list(profraw_dir.glob("*.profraw"))) if profraw_dir is not None else None,
        fdata_files=len(list(fdata_dir.glob("*.fdata"))) if fdata_dir is not None else None,
    )


def _check_phase_files(files: list[str], values: dict[str, str], label: str) -> None:
    for name in files:
        path = Path(name.format_map(values))
        if not path.is_file():
            raise TrainingFailed(f"phase {label}: no file {path}", "fix the path in the workload")
