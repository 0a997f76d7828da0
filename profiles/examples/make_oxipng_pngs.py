"""Deterministic PNG inputs for oxipng's training and bench: written with zlib at level 1 and no filters, so
oxipng has real work to do (filter choice, deflate, colour-type and bit-depth reductions)."""

import math
import struct
import sys
import zlib
from pathlib import Path


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png(path: Path, width: int, height: int, colour: int, pixel) -> None:
    rows = bytearray()
    for y in range(height):
        rows.append(0)  # filter: none
        for x in range(width):
            rows += bytes(pixel(x, y))
    header = struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(bytes(rows), 1))
        + chunk(b"IEND", b"")
    )


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    png(out / "gradient.png", 192, 192, 2, lambda x, y: (x, y, (x + y) // 2))
    png(
        out / "photo.png",
        160,
        160,
        2,
        lambda x, y: (
            int(127 + 120 * math.sin(x / 7.0) * math.cos(y / 5.0)) & 255,
            (x * y) % 251,
            int(128 + 100 * math.sin((x + y) / 11.0)) & 255,
        ),
    )
    png(out / "alpha.png", 128, 128, 6, lambda x, y: (200, 30, 30, 255 if (x // 16 + y // 16) % 2 else 0))
    png(out / "gray.png", 200, 120, 0, lambda x, y: (((x * 37 + y * 11) ^ (x * y)) % 256,))
    png(
        out / "palette-like.png",
        180,
        140,
        2,
        lambda x, y: [(0, 0, 0), (255, 255, 255), (0, 128, 255), (250, 200, 0)][(x // 9 + y // 7) % 4],
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
