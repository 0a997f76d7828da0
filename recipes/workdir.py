"""The work dir (``PGO_OUT``) and every path under it, named in one place.

Nothing else composes a path under the work dir: a stage asks ``plan.workdir.rejected(name)``, not
``plan.work / "rejected" / name`` (``tests/unit/test_workdir.py`` parses ``recipes/`` and keeps it so).
A sub-tool given a folder of its own (the baseline-CPU check's control programs, a training's scratch) names
the files inside it itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: the folder of a stage's checked binary, ``<work>/<folder>/<bin>``, by the stage's record in report.json
CHECKED_COPIES: dict[str, str] = {"optimise": "optimised", "bolt": "bolted"}


#: the folders the sessions make right under the work dir (of the properties below, and the workload runs' scratch):
#: a file or anything else at one of these names is refused before a session writes there (recipes/claim.py)
FOLDERS = (
    "logs", "bin", "observed", "children", "profraw", "generate-target", "shards", "rejected", "bolt", "test-target",
    "tests-shard-target", "plain-target", "variant-target", "bench", "cpu-baseline", "release", "rebuild",
    "determinism", "stripped", "stripped-bolt", "published", "published-bolt", "image",
    *CHECKED_COPIES.values(), "train", "verify", "bolt-train", "bolt-verify",
)  # fmt: skip


@dataclass(frozen=True)
class BenchDir:
    """``<work>/bench``: one bench run's frozen binaries, its runs, its results and its logs."""

    root: Path

    @property
    def bin(self) -> Path:
        """The frozen copies of the binaries compared (``<label>-<name>``)."""
        return self.root / "bin"

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    def run(self, scenario: str) -> Path:
        """A scenario's trials: its logs and its scratch."""
        return self.runs / scenario

    @property
    def results_json(self) -> Path:
        return self.root / "results.json"

    @property
    def results_md(self) -> Path:
        return self.root / "results.md"

    @property
    def chart(self) -> Path:
        return self.root / "chart.png"

    @property
    def coverage(self) -> Path:
        """The coverage check's profiles and its merge."""
        return self.root / "coverage"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def setup(self) -> Path:
        """The scratch of the workload's ``[setup]`` resources."""
        return self.root / "setup"

    @property
    def sigterm(self) -> Path:
        """The SIGTERM shim of servers without a handler (``exit_on_sigterm``)."""
        return self.root / "sigterm"


@dataclass(frozen=True)
class WorkDir:
    """The work dir ``root`` (``PGO_OUT``) and the name of everything the sessions keep under it."""

    root: Path

    # -- the pipeline

    @property
    def report(self) -> Path:
        """report.json: one record per stage (recipes/report.py)."""
        return self.root / "report.json"

    def folders(self) -> list[Path]:
        """The folders the sessions make right under the work dir (:data:`FOLDERS`)."""
        return [self.root / name for name in FOLDERS]

    @property
    def marker(self) -> Path:
        """The file that marks the folder as a work dir the pipeline made (recipes/claim.py)."""
        return self.root / ".pgo-workdir"

    @property
    def lock(self) -> Path:
        """The work-dir lock every session holds for its whole run, with its holder's pid (recipes/claim.py)."""
        return self.root / ".pgo-lock"

    @property
    def logs(self) -> Path:
        """Every command's log (recipes/runner.py)."""
        return self.root / "logs"

    @property
    def bin(self) -> Path:
        """The C compiler and lint wrappers the builds put on their PATH (recipes/toolchain/cflags.py)."""
        return self.root / "bin"

    def observed(self, build: str) -> Path:
        """What rustc received in one build (``instrument``, ``optimise``, ``plain``, ``test``): the records of
        the pipeline's RUSTC shim (recipes/toolchain/cargo/observed.py)."""
        return self.root / "observed" / build

    @property
    def children(self) -> Path:
        """The children a session runs, one record each while it runs (recipes/procs.py: the next session kills
        those a killed one left)."""
        return self.root / "children"

    @property
    def profraw(self) -> Path:
        """The training's raw profiles."""
        return self.root / "profraw"

    @property
    def generate_target(self) -> Path:
        """The instrumented build's target dir."""
        return self.root / "generate-target"

    def profdata(self, bin_name: str) -> Path:
        """The merged profile, ``<bin>.profdata``."""
        return self.root / f"{bin_name}.profdata"

    def partial_profdata(self, bin_name: str) -> Path:
        """The profile the optimised build reads under partial training: the merged (or given) one without its
        never-run records, ``<bin>.partial.profdata``."""
        return self.root / f"{bin_name}.partial.profdata"

    def carried_profdata(self, bin_name: str) -> Path:
        """A given profile carried forward to this build (PGO_CARRY): its records re-keyed to this build's function
        names, the edited ones left out, ``<bin>.carried.profdata``."""
        return self.root / f"{bin_name}.carried.profdata"

    def shard(self, name: str) -> Path:
        """A shard's folder (``shards/<name>``): its raw profiles and its own merged profile."""
        return self.root / "shards" / name

    def shard_profraw(self, name: str) -> Path:
        """A shard's raw profiles."""
        return self.shard(name) / "profraw"

    def shard_profdata(self, name: str) -> Path:
        """A shard's profile, merged alone (``shards/<name>/<name>.profdata``)."""
        return self.shard(name) / f"{name}.profdata"

    def shard_rest(self, name: str) -> Path:
        """The other shards merged as weighted, for the overlap of ``name`` with the rest."""
        return self.shard(name) / "rest.profdata"

    def scratch(self, name: str) -> Path:
        """The folder a workload run's phases may use (``train``, ``verify``, ``bolt-train``, ``bolt-verify``)."""
        return self.root / name

    def checked(self, stage: str, bin_name: str) -> Path:
        """Where ``stage`` (one of :data:`CHECKED_COPIES`) keeps the binary it checked."""
        return self.root / CHECKED_COPIES[stage] / bin_name

    def rejected(self, name: str) -> Path:
        """Where a binary that failed its checks is kept, by its name."""
        return self.root / "rejected" / name

    @property
    def bolt(self) -> Path:
        """The bolt stage's folder: its input, instrumented copy, profiles and output."""
        return self.root / "bolt"

    @property
    def test_target(self) -> Path:
        """pgo-test's target dir."""
        return self.root / "test-target"

    @property
    def tests_shard_target(self) -> Path:
        """The tests shard's target dir: the crate's tests built as the instrumented build."""
        return self.root / "tests-shard-target"

    @property
    def plain_target(self) -> Path:
        """The plain build's target dir."""
        return self.root / "plain-target"

    def variant_target(self, slug: str) -> Path:
        """A bench variant's target dir."""
        return self.root / "variant-target" / slug

    # -- the sessions beside the pipeline

    @property
    def bench(self) -> BenchDir:
        return BenchDir(self.root / "bench")

    def cpu_baseline(self, label: str | None = None) -> Path:
        """The baseline-CPU check's folder (``nox -s cpu-baseline``), or a release's, of one binary (``label``)."""
        return self.root / "cpu-baseline" if label is None else self.root / "cpu-baseline" / label

    def release(self, tag: str) -> Path:
        """A release's stripped binaries (``release/<tag>``)."""
        return self.root / "release" / tag

    def rebuild(self, tag: str) -> Path:
        """A rebuild's folder (``rebuild/<tag>``): the work dir of its rebuild, or of each target's."""
        return self.root / "rebuild" / tag

    def determinism(self, label: str | None = None) -> Path:
        """The determinism check's folder, or the work dir of one of its two runs (``label``)."""
        return self.root / "determinism" if label is None else self.root / "determinism" / label

    @property
    def determinism_profile(self) -> Path:
        """The determinism check's copy of its profile (a later merge must not change it)."""
        return self.determinism() / "profile.profdata"

    def for_target(self, triple: str) -> Path:
        """The work dir of one target of a release matrix or of a rebuild of several (``<work>/<triple>``)."""
        return self.root / triple

    # -- a rebuild's own work dir

    def stripped(self, bin_name: str) -> Path:
        return self.root / "stripped" / bin_name

    def stripped_bolt(self, bin_name: str) -> Path:
        return self.root / "stripped-bolt" / bin_name

    def artefact(self, file_name: str) -> Path:
        """A rebuilt artefact (a tarball), by its file name in the release."""
        return self.root / file_name

    def published(self, bin_name: str) -> Path:
        """The binary of the published PGO artefact, unpacked."""
        return self.root / "published" / bin_name

    def published_bolt(self, bin_name: str) -> Path:
        """The binary of the published PGO+BOLT artefact, unpacked."""
        return self.root / "published-bolt" / bin_name

    # -- a rebuild's image, made again from its rebuilt binaries (``nox -s rebuild`` of a release with an image)

    @property
    def image(self) -> Path:
        """The folder of the image made again (diffoscope's work dir too)."""
        return self.root / "image"

    @property
    def image_rebuilt(self) -> Path:
        """The OCI layout made again from the rebuilt binaries, written when its digest differs."""
        return self.image / "image-rebuilt"

    def image_layer(self, architecture: str, side: str) -> Path:
        """One platform's layer tarball, ``published`` or ``rebuilt``, for diffoscope."""
        return self.image / f"image-layer-{architecture}-{side}.tar"
