"""The release matrix: one release of several targets in one folder with one SHA256SUMS.

``nox -s release -- vX.Y.Z --target A --target B``: each target its own pipeline, checks and work dir
(``<PGO_OUT>/<triple>``), the files of all written at once. ``nox -s release -- vX.Y.Z --gather DIR [DIR ...]``:
the folders of separate runs (a CI matrix's legs), each checked against its own SHA256SUMS, joined into one folder
with one SHA256SUMS. Here: the posargs of the matrix, the targets checked before anything is built, and the gather.
"""

from __future__ import annotations

import stat
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from recipes.config import Config, load_config
from recipes.errors import CheckFailed, ConfigError, EnvironmentRefused
from recipes.plan import plan_rustc
from recipes.release.make import check_new_folder, join_files, write_dir
from recipes.release.manifest import Identity, check_schema, identity, peek
from recipes.release.provenance import (
    check_artefacts_folder,
    read_manifest,
    read_sums,
    refuse_one_target_twice,
    release_file,
)
from recipes.release.reproducible import SUMS, sha256_bytes, sha256sums_text
from recipes.release.reproducible.tags import GATHER
from recipes.runner import say
from recipes.store import sha256_file
from recipes.toolchain import preflight
from recipes.toolchain.cargo.invocation import cargo_env
from recipes.toolchain.rustflags import rust_triple
from recipes.workdir import WorkDir

TARGET = "--target"


def refuse_twice(targets: Sequence[str]) -> list[str]:
    """The triples of ``targets`` (a glibc suffix dropped), each once; a triple given twice is refused."""
    seen: dict[str, str] = {}
    for target in targets:
        triple = rust_triple(target)
        if triple in seen:
            same = (
                f"--target {target} is given twice"
                if seen[triple] == target
                else (f"--target {seen[triple]} and --target {target} are both {triple}")
            )
            raise ConfigError(f"{same}: a release has one set of files per target", "give each target once")
        seen[triple] = target
    return list(seen)


def target_configs(
    project_dir: Path, environ: Mapping[str, str], posargs: Sequence[str], targets: Sequence[str]
) -> list[Config]:
    """The configuration of each target of a release. None given: the one of PGO_TARGET (or the host), as
    without the matrix; one: that target, its work dir PGO_OUT; several: each checked (twice, unknown to rustc)
    before anything is built, each with its own work dir ``<PGO_OUT>/<triple>``."""
    if len(targets) <= 1:
        return [load_config(project_dir, environ, [*posargs, *(a for t in targets for a in (TARGET, t))])]
    triples = refuse_twice(targets)
    for target in targets:
        preflight.check_target_triple(target, environ, source=TARGET)
    configs = [load_config(project_dir, environ, [*posargs, TARGET, target]) for target in targets]
    _, env = plan_rustc(configs[0], configs[0].manifest.parent, cargo_env(environ))  # the crate's rustc
    for config, target in zip(configs, targets, strict=True):  # each std installed, before the first is built
        preflight.check_target_installed(target, env, config, source=TARGET)
    return [replace(config, out=WorkDir(config.out).for_target(t)) for config, t in zip(configs, triples, strict=True)]


# --- nox -s release -- vX.Y.Z --gather DIR [DIR ...] ---------------------------------------------------------


def read_folder(directory: Path, tag: str) -> dict[str, bytes]:
    """The files of one folder of a release, checked against its own SHA256SUMS: every listed file there, a
    regular file with its sha256, and nothing else in the folder."""
    check_artefacts_folder(directory, tag)
    sums = read_sums(directory)
    files: dict[str, bytes] = {}
    for name, want in sorted(sums.items()):
        path = release_file(directory, name)
        digest = sha256_file(path)
        if digest != want:
            raise CheckFailed(
                f"{name} in {directory} has sha256 {digest}, its SHA256SUMS says {want}", "download that leg again"
            )
        files[name] = path.read_bytes()
    for path in sorted(directory.iterdir()):
        if path.name != SUMS and path.name not in sums:
            kind = "a directory" if stat.S_ISDIR(path.lstat().st_mode) else "a file"
            raise CheckFailed(
                f"{path.name} in {directory} is {kind} its SHA256SUMS does not list", "gather only a release's folders"
            )
    return files


def commit_of(files: Mapping[str, bytes], directory: Path, tag: str) -> str:
    """The commit of a folder's manifests (every manifest named for ``tag`` must be of one commit). Only their tag
    and commit are read (:func:`recipes.release.manifest.identity`): the verify of the gathered folder reads the
    rest."""
    found: dict[str, Identity] = {}
    for name in sorted(name for name in files if name.endswith("-manifest.json")):
        found[name] = identity(read_manifest(directory / name), f"{name} in {directory}")
        if found[name].tag != tag:
            raise CheckFailed(
                f"{name} in {directory} is of {found[name].tag!r}, not {tag}", f"gather only the folders of {tag}"
            )
    if not found:
        raise CheckFailed(f"{directory} holds no manifest", f"gather the folders of {tag}'s release")
    commits = {m.commit for m in found.values()}
    if len(commits) != 1:
        raise CheckFailed(
            f"the manifests in {directory} are of {len(commits)} commits", "gather the folders of one release"
        )
    for name in found:  # a layout verify does not read would make a gathered folder verify refuses
        check_schema(read_manifest(directory / name), f"{name} in {directory}")
    return commits.pop()


def refuse_a_target_twice(folders: Sequence[Path], files: Mapping[str, Mapping[str, bytes]], tag: str) -> None:
    """Two manifests of one target among the folders (of other names: one name in two folders is join_files'
    refusal): verify refuses that folder, so the gather does, before writing it."""
    triples = {
        f"{name} in {folder}": peek(read_manifest(folder / name), "triple")
        for folder in folders
        for name in sorted(files[str(folder)])
        if name.endswith("-manifest.json")
    }
    refuse_one_target_twice(triples, tag, f"in the {len(folders)} folders gathered", "gather one folder per target")


def gather(tag: str, folders: Sequence[Path], out_dir: Path) -> list[str]:
    """Join the folders of ``tag`` (one per target, made by separate runs) into ``out_dir`` with one SHA256SUMS:
    each checked against its own SHA256SUMS, all of one tag and commit, no file name in two; written at once."""
    check_new_folder(out_dir)
    if out_dir.exists():
        raise EnvironmentRefused(f"{out_dir} already exists", "a release is written once: remove it to gather again")
    folders = [folder.absolute() for folder in folders]
    if len(set(folders)) != len(folders):
        raise ConfigError(f"{GATHER} names a folder twice", "name each leg's folder once")
    groups: dict[str, dict[str, bytes]] = {}
    commits: dict[Path, str] = {}
    for folder in folders:
        files = read_folder(folder, tag)
        commits[folder] = commit_of(files, folder, tag)
        first = next(iter(commits.items()))
        if commits[folder] != first[1]:
            raise CheckFailed(
                f"{folder} is {tag} of commit {commits[folder][:12]}, {first[0]} of {first[1][:12]}",
                "gather the folders of one release: every leg builds the same commit",
            )
        groups[str(folder)] = {name: data for name, data in files.items() if name != SUMS}
    joined = join_files(groups)
    refuse_a_target_twice(folders, groups, tag)
    joined[SUMS] = sha256sums_text({name: sha256_bytes(data) for name, data in joined.items()}).encode()
    write_dir(out_dir, joined)
    say(f"release: {len(joined)} files of {len(folders)} folders in {out_dir}")
    return [
        f"gathered {tag} ({next(iter(commits.values()))[:12]}) in {out_dir}: {len(joined)} files, one SHA256SUMS",
        *(f"  {folder}: {len(groups[str(folder)])} files" for folder in folders),
    ]
