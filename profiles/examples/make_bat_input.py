"""The input of bat's training (profiles/examples/bat.toml, ``[[setup.command]]``): a small git repository with
uncommitted changes, and a few generated files, the same bytes every run (a fixed seed), into the folder given as the
one argument.

bat's users page source files in a git working tree: its gutter marks the lines added, changed and removed since the
last commit, which it reads with libgit2 (libgit2-sys's C). The repository (``repo/``) holds Rust, Python, C, YAML
and Markdown files, committed, then edited: lines added, changed and removed in each, and one new file that git does
not track. Beside it (``data/``): a long log file, a CSV table, a JSON document on one line, a file of ANSI colour
escapes, a file with tabs and control characters, and a UTF-16 text.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

WORDS = (
    "alpha", "beta", "gamma", "delta", "parser", "lexer", "token", "buffer", "config", "value", "index", "count",
    "state", "result", "error", "width", "height", "theme", "syntax", "line", "range", "file", "path", "name",
)  # fmt: skip


def word(rng: random.Random) -> str:
    return rng.choice(WORDS)


def rust(rng: random.Random, functions: int) -> list[str]:
    lines = ["use std::collections::HashMap;", "use std::fmt;", ""]
    for f in range(functions):
        a, b = word(rng), word(rng)
        lines += [
            f"/// Computes the {a} of a {b} ({f}).",
            f"pub fn {a}_{b}_{f}(items: &[u64], map: &mut HashMap<String, u64>) -> Result<u64, fmt::Error> {{",
            f'    let key = format!("{a}-{{}}", items.len());',
            f"    let total: u64 = items.iter().map(|x| x * {rng.randrange(2, 99)}).sum();",
            "    if total % 3 == 0 {",
            f"        map.insert(key, total); // {b}",
            "    }",
            f'    println!("{{:>8}} {{:#x}} \\t{b}", total, total);',
            "    Ok(total)",
            "}",
            "",
        ]
    return lines


def python(rng: random.Random, functions: int) -> list[str]:
    lines = ['"""A generated module."""', "", "import re", "from dataclasses import dataclass", ""]
    for f in range(functions):
        a, b = word(rng), word(rng)
        lines += [
            "@dataclass",
            f"class {a.title()}{f}:",
            f"    {b}: int = {rng.randrange(100)}",
            "",
            f"    def {a}(self, text: str) -> list[str]:",
            f'        """Split the {b}."""',
            rf"        return [m.group(0) for m in re.finditer(r'\w+{f}', text) if len(m.group(0)) > {f % 7}]",
            "",
        ]
    return lines


def c_source(rng: random.Random, functions: int) -> list[str]:
    lines = ["#include <stdio.h>", "#include <string.h>", "", "#define LIMIT 4096", ""]
    for f in range(functions):
        a = word(rng)
        lines += [
            f"/* {a}: a generated function */",
            f"static int {a}_{f}(const char *s, size_t n) {{",
            "    int acc = 0;",
            "    for (size_t i = 0; i < n && i < LIMIT; i++) {",
            f"        acc = acc * 31 + (unsigned char)s[i] ^ 0x{rng.randrange(256):02x};",
            "    }",
            f'    printf("%s: %d\\n", "{a}", acc);',
            "    return acc;",
            "}",
            "",
        ]
    return lines


def yaml(rng: random.Random, entries: int) -> list[str]:
    lines = ["# generated settings", "version: 3", "services:"]
    for e in range(entries):
        lines += [
            f"  {word(rng)}-{e}:",
            f"    image: 'registry.example/{word(rng)}:{rng.randrange(1, 9)}.{rng.randrange(20)}'",
            f"    replicas: {rng.randrange(1, 6)}",
            f"    enabled: {rng.choice(('true', 'false'))}",
            "    ports: [80, 443]",
        ]
    return lines


def markdown(rng: random.Random, sections: int) -> list[str]:
    lines = ["# Generated notes", ""]
    for s in range(sections):
        lines += [
            f"## {word(rng).title()} {s}",
            "",
            f"Some *{word(rng)}* text with `code` and a [link](https://example.org/{s}).",
            "",
            f"- {word(rng)}",
            f"- **{word(rng)}**",
            "",
            "```rust",
            f"let {word(rng)} = {s};",
            "```",
            "",
        ]
    return lines


def edit(lines: list[str], rng: random.Random) -> list[str]:
    """Changes, removals and additions, as a working tree has them before a commit."""
    out = list(lines)
    for _ in range(max(1, len(out) // 40)):
        i = rng.randrange(len(out))
        out[i] = out[i] + "  // edited"
    for _ in range(max(1, len(out) // 60)):
        del out[rng.randrange(len(out))]
    for _ in range(max(1, len(out) // 50)):
        i = rng.randrange(len(out))
        out[i:i] = [f"    // added {word(rng)}", f"    // added {word(rng)} too"]
    return out


def write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def git(repo: Path, *args: str) -> None:
    identity = ["-c", "user.name=Trainer", "-c", "user.email=trainer@example.org", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", *identity, *args], cwd=repo, check=True, stdout=subprocess.DEVNULL)


def make_repo(root: Path, rng: random.Random) -> None:
    repo = root / "repo"
    files = {
        "src/engine.rs": rust(rng, 60),
        "src/util.rs": rust(rng, 25),
        "tools/split.py": python(rng, 40),
        "csrc/hash.c": c_source(rng, 40),
        "deploy/services.yaml": yaml(rng, 40),
        "NOTES.md": markdown(rng, 25),
    }
    for name, lines in files.items():
        write(repo / name, lines)
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "generated")
    for name, lines in files.items():
        write(repo / name, edit(lines, rng))
    write(repo / "src/untracked.rs", rust(rng, 5))


def make_data(root: Path, rng: random.Random) -> None:
    data = root / "data"
    levels = ("INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR")
    log = [
        f"2026-12-07T{h % 24:02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}.{rng.randrange(1000):03d}Z "
        f"{rng.choice(levels):5} [{word(rng)}] request id={rng.randrange(10**6):06d} "
        f"path=/api/{word(rng)}/{rng.randrange(500)} status={rng.choice((200, 200, 304, 404, 500))} "
        f"took={rng.randrange(1, 900)}ms"
        for h in range(6000)
    ]
    write(data / "server.log", log)
    csv = ["id,name,kind,amount,ratio"] + [
        f"{i},{word(rng)},{word(rng)},{rng.randrange(10**5)},{rng.random():.4f}" for i in range(3000)
    ]
    write(data / "table.csv", csv)
    document = {
        f"{word(rng)}{i}": {"n": i, "tags": [word(rng) for _ in range(4)], "ok": i % 2 == 0} for i in range(800)
    }
    (data / "document.json").write_text(json.dumps(document) + "\n", encoding="utf-8")
    colours = [f"\x1b[3{i % 8}m{word(rng)}\x1b[0m \x1b[1m{word(rng)}\x1b[0m plain {i}" for i in range(2000)]
    write(data / "colours.txt", colours)
    controls = [f"\t{word(rng)}\t\t{i}\r \x07 \x1b x{chr(0x7F)} \u00a0nbsp \u200b {word(rng)}" for i in range(1500)]
    write(data / "controls.txt", controls)
    utf16 = "\n".join(f"{word(rng)} — ünïcödé {i}" for i in range(1000)) + "\n"
    (data / "utf16.txt").write_bytes(b"\xff\xfe" + utf16.encode("utf-16-le"))


def main() -> None:
    root = Path(sys.argv[1])
    rng = random.Random(20261207)
    make_repo(root, rng)
    make_data(root, rng)


if __name__ == "__main__":
    main()
