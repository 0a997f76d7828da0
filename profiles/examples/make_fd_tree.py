"""The input of fd's training (profiles/examples/fd.toml, ``[[setup.command]]``): a tree of about 14,000 files in
about 900 directories, the same names every run (a fixed seed), into the folder given as the one argument.

A source tree as fd's users search it: ten projects of nested modules, files of a dozen extensions (Rust, Python,
C, Markdown, JSON, TOML, logs, images), a ``.git`` folder so that the ``.gitignore`` files count (fd reads them only
inside a git repository), build output and ``node_modules`` the ignore files hide, hidden files and folders, and
names in upper and lower case and with non-ASCII letters. Most files are empty: fd reads names, not contents; a
few carry some bytes for ``--size``.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

PROJECTS = 10
MODULES = 8
SUBMODULES = 6
EXTENSIONS = ("rs", "rs", "rs", "py", "py", "c", "h", "md", "json", "toml", "txt", "log", "png", "yaml")
STEMS = ("mod", "lib", "main", "util", "parser", "lexer", "config", "test_io", "test_api", "café", "Über", "README")


def touch(path: Path, size: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)


def main() -> None:
    root = Path(sys.argv[1])
    rng = random.Random(20261207)
    (root / ".git").mkdir(parents=True)
    (root / ".gitignore").write_text("target/\nnode_modules/\n*.log\n", encoding="utf-8")
    for p in range(PROJECTS):
        project = root / f"project{p}"
        touch(project / "Cargo.toml", 300)
        touch(project / "README.md", 2_000)
        (project / ".gitignore").write_text("*.tmp\ngenerated/\n", encoding="utf-8")
        touch(project / ".config" / "settings.toml", 100)
        for m in range(MODULES):
            for s in range(SUBMODULES):
                folder = project / "src" / f"mod{m}" / f"sub{s}"
                for index in range(rng.randrange(10, 22)):
                    name = f"{rng.choice(STEMS)}{index}.{rng.choice(EXTENSIONS)}"
                    touch(folder / name, rng.choice((0, 0, 0, 512, 4096)))
                touch(folder / f"scratch{s}.tmp")
                touch(folder / ".hidden.rs")
            touch(project / "src" / f"mod{m}" / "mod.rs", 1_000)
            touch(project / "src" / f"mod{m}" / "generated" / "bindings.rs", 8_000)
        for index in range(300):
            touch(project / "target" / "release" / "deps" / f"lib{index}.rlib")
        for index in range(200):
            touch(project / "node_modules" / f"pkg{index % 20}" / f"index{index}.js")
        for index in range(50):
            touch(project / ".cache" / f"entry{index}.bin")


if __name__ == "__main__":
    main()
