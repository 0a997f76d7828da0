"""Make the folder dufs serves in the training and the bench: the same bytes every run (a fixed seed).

    python3 make_dufs_tree.py OUT

OUT (empty) gets:
- docs/: 12 project folders of notes, sources and data, 3 levels deep (about 400 small text files, 200 B to 12 KB):
  listings in HTML and JSON, search by name;
- files/: small-4k.txt, page-24k.html, image-180k.png, large-6m.bin (random bytes): GETs, HEADs and ranges;
- held/: files of other sizes no training phase asks for (note-1k.txt, photo-700k.jpg, video-20m.mp4);
- archive/: a folder of 60 files (text and random bytes) for a zip download;
- uploads/: empty, where PUT requests write.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

WORDS = (
    "alpha",
    "beta",
    "gamma",
    "delta",
    "server",
    "request",
    "response",
    "header",
    "body",
    "stream",
    "folder",
    "index",
    "upload",
    "download",
    "range",
    "search",
    "listing",
    "archive",
    "config",
    "report",
    "budget",
    "invoice",
    "draft",
    "final",
    "notes",
    "meeting",
    "summary",
    "plan",
    "release",
    "build",
    "profile",
    "cache",
    "token",
    "session",
    "client",
    "error",
    "warning",
    "module",
    "test",
    "data",
)
EXTENSIONS = (".md", ".txt", ".rs", ".py", ".json", ".csv", ".html", ".toml", ".log", ".yaml")


def text(rng: random.Random, size: int) -> bytes:
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(WORDS)
        words.append(word)
        length += len(word) + 1
    lines = [" ".join(words[i : i + 12]) for i in range(0, len(words), 12)]
    return ("\n".join(lines) + "\n").encode()[:size]


def main(out: Path) -> None:
    rng = random.Random(20261207)
    files = 0
    for project in range(12):
        root = out / "docs" / f"project-{project:02d}-{rng.choice(WORDS)}"
        for sub in ("", "src", "src/core", "notes", "data/2026"):
            folder = root / sub
            folder.mkdir(parents=True, exist_ok=True)
            for n in range(rng.randint(5, 9)):
                name = f"{rng.choice(WORDS)}-{rng.choice(WORDS)}-{n}{rng.choice(EXTENSIONS)}"
                (folder / name).write_bytes(text(rng, rng.randint(200, 12_000)))
                files += 1
    fixed = out / "files"
    fixed.mkdir(parents=True)
    (fixed / "small-4k.txt").write_bytes(text(rng, 4_096))
    page = b"<!doctype html><title>page</title><pre>\n" + text(rng, 24_000) + b"</pre>\n"
    (fixed / "page-24k.html").write_bytes(page)
    (fixed / "image-180k.png").write_bytes(rng.randbytes(180 * 1024))
    (fixed / "large-6m.bin").write_bytes(rng.randbytes(6 * 1024 * 1024))
    held = out / "held"
    held.mkdir()
    (held / "note-1k.txt").write_bytes(text(rng, 1_000))
    (held / "photo-700k.jpg").write_bytes(rng.randbytes(700 * 1024))
    (held / "video-20m.mp4").write_bytes(rng.randbytes(20 * 1024 * 1024))
    archive = out / "archive"
    for n in range(60):
        folder = archive / ("sub" if n % 3 == 0 else "")
        folder.mkdir(parents=True, exist_ok=True)
        if n % 4 == 0:
            (folder / f"blob-{n:02d}.bin").write_bytes(rng.randbytes(rng.randint(1_000, 40_000)))
        else:
            (folder / f"doc-{n:02d}.txt").write_bytes(text(rng, rng.randint(500, 30_000)))
    (out / "uploads").mkdir()
    print(f"{out}: {files} files under docs/, 4 under files/, 3 under held/, 60 under archive/")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
