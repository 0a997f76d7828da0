"""The file names of one release of one binary for one target."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Names:
    """The file names of one release of one binary for one target."""

    bin: str
    tag: str
    triple: str

    @property
    def base(self) -> str:
        return f"{self.bin}-{self.tag}-{self.triple}"

    @property
    def plain_tarball(self) -> str:
        return f"{self.base}.tar.gz"

    @property
    def pgo_tarball(self) -> str:
        return f"{self.base}-pgo.tar.gz"

    @property
    def profile(self) -> str:
        return f"{self.base}-pgo.profdata"

    @property
    def pgo_bolt_tarball(self) -> str:
        return f"{self.base}-pgo-bolt.tar.gz"

    @property
    def bolt_profile(self) -> str:
        return f"{self.base}-pgo-bolt.fdata"

    @property
    def pgo_bolt_top(self) -> str:
        return f"{self.base}-pgo-bolt"

    @property
    def manifest(self) -> str:
        return f"{self.base}-manifest.json"

    @property
    def plain_top(self) -> str:
        return self.base

    @property
    def pgo_top(self) -> str:
        return f"{self.base}-pgo"

    def artefact(self, kind: str) -> tuple[str, str | None]:
        """The file name of an artefact of the manifest (``plain``, ``pgo``, ``profile``, ``pgo_bolt``,
        ``bolt_profile``), and the one directory of its tarball (None for a profile)."""
        return {
            "plain": (self.plain_tarball, self.plain_top),
            "pgo": (self.pgo_tarball, self.pgo_top),
            "profile": (self.profile, None),
            "pgo_bolt": (self.pgo_bolt_tarball, self.pgo_bolt_top),
            "bolt_profile": (self.bolt_profile, None),
        }[kind]
