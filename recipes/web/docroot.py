"""Deterministic files of the training: a document root for the server's /static/ and request bodies.

The content depends on nothing but the names (SHAKE-256 of the name), so every run serves the same bytes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from recipes.files import write_atomically

KIB = 1024
MIB = 1024 * KIB

#: document-root files: relative path -> size in bytes
DOCROOT_FILES: dict[str, int] = {
    "index.html": 5 * KIB,
    "image.png": 200 * KIB,
    "download.bin": 10 * MIB,
    "style.css": 1800,
    "app.js": 3100,
    "robots.txt": 60,
    "docs/a.html": 900,
    "docs/b.html": 2400,
}

#: request bodies: name -> (size, text that must be in it or "")
BODY_FILES: dict[str, tuple[int, str]] = {
    "form-2k.txt": (2 * KIB, ""),
    "json-16k.json": (16 * KIB, ""),
    "attack.txt": (1 * KIB, "q=1 union select password from users -- <script>alert(1)</script>"),
    "upload-256k.bin": (256 * KIB, ""),
    "large-1m.bin": (1 * MIB, ""),
}


def content(name: str, size: int, text: str = "") -> bytes:
    """``size`` bytes of printable text determined by ``name`` (an HTML-ish page, a blob, a body)."""
    raw = hashlib.shake_256(name.encode()).digest(size)
    if name.endswith((".html", ".css", ".js", ".txt", ".json")):
        alphabet = b"abcdefghijklmnopqrstuvwxyz     \n"
        raw = bytes(alphabet[b % len(alphabet)] for b in raw)
    marker = text.encode()
    return (marker + raw)[:size] if marker else raw


def make_docroot(directory: Path, own: Path | None = None) -> dict[str, str]:
    """Write the document root and the bodies; returns the placeholders ``{docroot}`` and ``{bodies}``. With
    ``own`` (a folder of the user's files), ``{docroot}`` is that folder as it is: nothing is written into it."""
    root, bodies = (own or directory / "docroot"), directory / "bodies"
    if own is None:
        for name, size in DOCROOT_FILES.items():
            write_atomically(root / name, content(name, size))
    for name, (size, text) in BODY_FILES.items():
        write_atomically(bodies / name, content(name, size, text))
    return {"docroot": str(root), "bodies": str(bodies)}
