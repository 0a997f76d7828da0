"""The input of sd's training (profiles/examples/sd.toml, ``[[setup.command]]``): a log of 20,000 lines, the
same bytes every run (a fixed seed), into the folder given as the one argument.

sd's own sources are a few hundred lines each: replacing in them is mostly the process's start. A log of a few
megabytes makes the replacement loop, the regex engine's search over many matches and the output's writing the
work, as a user's large file does; its lines mix dates, levels, key=value pairs, quoted strings and non-ASCII text.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

LINES = 20_000
LEVELS = ("INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR")
WORDS = ("request", "served", "cache", "miss", "upstream", "timeout", "retry", "user", "café", "naïve", "über")


def line(rng: random.Random, index: int) -> str:
    month, day = 1 + index % 12, 1 + index % 28
    stamp = f"2026-{month:02d}-{day:02d}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}"
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 12)))
    pairs = " ".join(f"{key}={rng.randrange(10_000)}" for key in rng.sample(("id", "ms", "bytes", "port"), 2))
    return f'{stamp} {rng.choice(LEVELS)} [worker-{rng.randrange(8)}] {words} {pairs} path="/api/v{rng.randrange(3)}"\n'


def main() -> None:
    folder = Path(sys.argv[1])
    rng = random.Random(20260101)
    text = "".join(line(rng, index) for index in range(LINES))
    (folder / "app.log").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
