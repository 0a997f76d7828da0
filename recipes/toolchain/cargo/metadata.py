"""Cargo's word on the crate: the package and binary to build, as ``cargo metadata`` describes them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recipes.errors import ConfigError, MissingInput
from recipes.runner import capture


@dataclass(frozen=True)
class CrateInfo:
    """The package and binary to build, as ``cargo metadata`` describes them."""

    manifest: Path
    package: str
    package_dir: Path
    bin: str
    crate_names: tuple[str, ...]  # the rustc crate names of the package's lib and the bin
    target_directory: Path
    #: the source files of the package's lib and the bin (``cargo metadata``'s ``src_path``); with them a rustc
    #: command is the package's own only when it compiles one of these files, not merely a crate of that name
    sources: tuple[Path, ...] = ()
    workspace_root: Path | None = None  # the directory cargo runs rustc in for the workspace's packages
    #: the package's targets ``cargo test`` builds apart from its lib and bins (integration tests, and examples and
    #: benches with ``test = true``): the only tests that can run the binary (``CARGO_BIN_EXE_<bin>``) or call the
    #: lib as the binary has it; the lib's and the bins' unit tests are those crates compiled again as test crates
    linking_tests: tuple[str, ...] = ()


def crate_info(manifest: Path, package: str | None, bin_name: str | None, env: Mapping[str, str]) -> CrateInfo:
    if not manifest.is_file():
        raise MissingInput(f"no Cargo.toml at {manifest}", "set PGO_MANIFEST or [tool.pgo] manifest")
    text = capture(
        ["cargo", "metadata", "--format-version", "1", "--no-deps", "--manifest-path", str(manifest)],
        env=env,
        cwd=manifest.parent,
    )
    meta = json.loads(text)
    packages = meta["packages"]
    names = ", ".join(p["name"] for p in packages)
    if package is None:
        own = [p for p in packages if Path(p["manifest_path"]) == manifest]
        if len(own) != 1:
            raise ConfigError(f"{manifest} is a workspace: which package?", f"set PGO_PACKAGE to one of {names}")
        chosen = own[0]
    else:
        matches = [p for p in packages if p["name"] == package]
        if not matches:
            raise ConfigError(f"no package {package!r} in {manifest}", f"known packages: {names}")
        chosen = matches[0]
    bins = [t["name"] for t in chosen["targets"] if "bin" in t["kind"]]
    lib_targets = [t for t in chosen["targets"] if "lib" in t["kind"] or "rlib" in t["kind"]]
    if bin_name is None:
        if len(bins) != 1:
            raise ConfigError(
                f"package {chosen['name']} has {len(bins)} binaries" + (f" ({', '.join(bins)})" if bins else ""),
                "set PGO_BIN to the one to build",
            )
        bin_name = bins[0]
    elif bin_name not in bins:
        raise ConfigError(
            f"package {chosen['name']} has no binary {bin_name!r}", f"its binaries: {', '.join(bins) or 'none'}"
        )
    crate_names = tuple(name.replace("-", "_") for name in (*(t["name"] for t in lib_targets), bin_name))
    own_targets = [*lib_targets, *(t for t in chosen["targets"] if "bin" in t["kind"] and t["name"] == bin_name)]
    return CrateInfo(
        manifest=manifest,
        package=chosen["name"],
        package_dir=Path(chosen["manifest_path"]).parent,
        bin=bin_name,
        crate_names=crate_names,
        target_directory=Path(meta["target_directory"]),
        sources=tuple(Path(t["src_path"]) for t in own_targets),
        workspace_root=Path(meta["workspace_root"]),
        linking_tests=linking_tests(chosen["targets"]),
    )


def linking_tests(targets: list[dict[str, Any]]) -> tuple[str, ...]:
    """The names of the targets (``cargo metadata``'s) that ``cargo test`` builds as tests of their own: an
    integration test (kind ``test``), an example or a bench with ``test = true``."""
    kinds = {"test", "example", "bench"}
    return tuple(t["name"] for t in targets if kinds & set(t["kind"]) and t.get("test", t["kind"] == ["test"]))


def _graph(manifest: Path, triple: str, env: Mapping[str, str], *, locked: bool) -> list[dict[str, Any]]:
    """The packages of ``manifest``'s dependency graph for ``triple`` (``cargo metadata`` with its dependencies)."""
    argv = ["cargo", "metadata", "--format-version", "1", "--filter-platform", triple, "--manifest-path", str(manifest)]
    packages: list[dict[str, Any]] = json.loads(
        capture([*argv, "--locked"] if locked else argv, env=env, cwd=manifest.parent)
    )["packages"]
    return packages


def build_script_packages(
    manifest: Path, triple: str, env: Mapping[str, str], *, locked: bool
) -> tuple[frozenset[str], frozenset[str]]:
    """The names of the packages of ``manifest``'s dependency graph for ``triple`` (``cargo metadata`` with its
    dependencies), and of those among them with a build script: the only ones with C or C++ to profile."""
    packages = _graph(manifest, triple, env, locked=locked)
    scripts = (p["name"] for p in packages if any("custom-build" in t["kind"] for t in p["targets"]))
    return frozenset(p["name"] for p in packages), frozenset(scripts)


#: the build-dependencies through which a build script compiles C or C++ (cmake drives cc-rs's compiler too)
C_BUILDERS = frozenset({"cc", "cmake"})


def c_packages(manifest: Path, triple: str, env: Mapping[str, str], *, locked: bool) -> list[str]:
    """The packages of the graph whose build script compiles C or C++: a build-dependency on cc or cmake."""
    return sorted(
        p["name"]
        for p in _graph(manifest, triple, env, locked=locked)
        if any(d["name"] in C_BUILDERS and d.get("kind") == "build" for d in p["dependencies"])
    )
