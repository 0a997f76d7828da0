"""The pieces of a build that can be made again byte for byte: path remapping, a fixed environment,
deterministic tarballs, SHA256SUMS, release tags, git queries, and where two binaries differ.

Everything here is small and pure (or a thin query of git); the sessions put it together in
recipes/release.py and recipes/rebuild.py.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import shlex
import tarfile
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from recipes.errors import CheckFailed, CommandFailed, ConfigError, MissingInput
from recipes.runner import capture

# --- release tags -------------------------------------------------------------------------------

_TAG = re.compile(r"^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z][0-9A-Za-z.-]*)?$")


def check_tag(text: str) -> str:
    """A release tag ``vX.Y.Z`` (an optional ``-rc.1`` suffix); anything else is a :class:`ConfigError`."""
    if not _TAG.match(text):
        raise ConfigError(f"{text!r} is not a release tag", "give the tag first, as vX.Y.Z: nox -s release -- v1.2.3")
    return text


def split_tag(posargs: Sequence[str], session: str) -> tuple[str, list[str]]:
    """The positional tag the release sessions take first, and the options after it."""
    if not posargs or posargs[0].startswith("-"):
        raise ConfigError(f"nox -s {session} needs a release tag first", f"nox -s {session} -- v1.2.3 [--options]")
    return check_tag(posargs[0]), list(posargs[1:])


def take_option(posargs: Sequence[str], option: str) -> tuple[str | None, list[str]]:
    """Remove ``--option value`` (or ``--option=value``) from ``posargs``: its value and the rest."""
    rest: list[str] = []
    value: str | None = None
    items = list(posargs)
    index = 0
    while index < len(items):
        item = items[index]
        if item == option:
            if index + 1 >= len(items):
                raise ConfigError(f"{option} needs a value", f"write {option} DIR")
            value = items[index + 1]
            index += 2
            continue
        if item.startswith(option + "="):
            value = item.split("=", 1)[1]
        else:
            rest.append(item)
        index += 1
    return value, rest


# --- the environment of a reproducible build -----------------------------------------------------

#: what the build machine's paths become in the binary
SOURCE_PREFIX = "/build/src"
WORK_PREFIX = "/build/work"
CARGO_HOME_PREFIX = "/cargo"
SYSROOT_PREFIX = "/rustc/sysroot"

#: variables that would make the build depend on the terminal, the locale or the clock
_FIXED = {"LC_ALL": "C", "LANG": "C", "TZ": "UTC", "CARGO_TERM_COLOR": "never", "CARGO_TERM_PROGRESS_WHEN": "never"}
#: variables that would put two builds of two checkouts in one target dir
_DROPPED = ("CARGO_TARGET_DIR", "CARGO_BUILD_TARGET_DIR", "LANGUAGE")


def reproducible_env(base_env: Mapping[str, str], source_date_epoch: int) -> dict[str, str]:
    """A new environment: SOURCE_DATE_EPOCH set, no colour, the C locale, UTC, no shared target dir."""
    env = {k: v for k, v in base_env.items() if k not in _DROPPED and not k.startswith("LC_")}
    env.update(_FIXED)
    env["SOURCE_DATE_EPOCH"] = str(source_date_epoch)
    return env


def cargo_home(env: Mapping[str, str]) -> Path:
    return Path(env.get("CARGO_HOME") or Path(env.get("HOME", "~")).expanduser() / ".cargo")


def remap_pairs(
    *, source_root: Path, work: Path, cargo_home: Path, sysroot: Path, rustc_commit: str
) -> list[tuple[str, str]]:
    """``(build machine path, neutral path)`` pairs, the most specific last (rustc lets the last match win).

    Each path is given as it is and resolved, when those differ, since cargo passes paths unresolved.
    """
    wanted = [
        (sysroot, SYSROOT_PREFIX),
        (sysroot / "lib" / "rustlib" / "src" / "rust", f"/rustc/{rustc_commit}"),
        (cargo_home, CARGO_HOME_PREFIX),
        (source_root, SOURCE_PREFIX),
        (work, WORK_PREFIX),
    ]
    pairs: dict[str, str] = {}
    for path, neutral in wanted:
        for form in (path.absolute(), path.resolve()):
            text = str(form)
            if any(ch.isspace() for ch in text):
                raise ConfigError(
                    f"{text} has white space in its path, which the rustflags variable cannot carry",
                    "build from a directory whose path has no spaces",
                )
            pairs[text] = neutral
    return sorted(pairs.items(), key=lambda kv: len(kv[0]))


def remap_flags(pairs: Iterable[tuple[str, str]]) -> list[str]:
    return [f"--remap-path-prefix={src}={dest}" for src, dest in pairs]


def is_remap_flag(flag: str) -> bool:
    return flag.startswith("--remap-path-prefix=")


def without_remap(flags: Sequence[str]) -> list[str]:
    """The flags that do not depend on the build machine's paths (remap flags in the joined form only)."""
    if "--remap-path-prefix" in flags:
        raise ConfigError(
            "--remap-path-prefix is given as two words in the rustflags",
            "write it as --remap-path-prefix=FROM=TO, or leave it to the release session",
        )
    return [f for f in flags if not is_remap_flag(f)]


# --- deterministic tarballs and SHA256SUMS -------------------------------------------------------


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


#: the checksum file of a release, beside its files
SUMS = "SHA256SUMS"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tarball_bytes(files: Mapping[str, tuple[bytes, int]], mtime: int) -> bytes:
    """A .tar.gz of ``{name: (content, mode)}``: names sorted, owner 0, mtime ``mtime``, gzip mtime 0.

    The directories of the names get their own entries (mode 0755). Nothing of the machine (user,
    umask, time, file name) gets in, so the same files give the same bytes anywhere.
    """
    dirs: set[str] = set()
    for name in files:
        parts = name.split("/")[:-1]
        dirs.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    entries: list[tuple[str, bytes | None, int]] = [(d, None, 0o755) for d in dirs]
    entries += [(n, content, mode) for n, (content, mode) in files.items()]
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, content, mode in sorted(entries, key=lambda e: e[0]):
            info = tarfile.TarInfo(name)
            info.mtime = mtime
            info.mode = mode
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if content is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    packed = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, compresslevel=9, mtime=0) as gz:
        gz.write(raw.getvalue())
    return packed.getvalue()


def binary_tarball(bin_name: str, binary: bytes, top: str, mtime: int) -> bytes:
    """The release tarball of one binary: ``<top>/<bin>``, mode 0755."""
    return tarball_bytes({f"{top}/{bin_name}": (binary, 0o755)}, mtime)


def tar_member(tarball: Path, name: str) -> bytes:
    """One file of a .tar.gz, or a :class:`MissingInput`."""
    with tarfile.open(tarball, mode="r:gz") as tar:
        try:
            member = tar.getmember(name)
        except KeyError as exc:
            raise MissingInput(f"{tarball.name} has no {name}", "is it the release's tarball?") from exc
        stream = tar.extractfile(member)
        if stream is None:
            raise MissingInput(f"{name} in {tarball.name} is not a file", "is it the release's tarball?")
        return stream.read()


#: what the release writes in a tarball (:func:`binary_tarball`): one directory and the binary, both of this mode
TARBALL_MODE = 0o755
_LINKS_AND_DEVICES = {
    tarfile.SYMTYPE: "a symbolic link",
    tarfile.LNKTYPE: "a hard link",
    tarfile.CHRTYPE: "a character device",
    tarfile.BLKTYPE: "a block device",
    tarfile.FIFOTYPE: "a fifo",
}
_TARBALL_HINT = "it is not a tarball the release writes: download the release again"


def _member_problem(member: tarfile.TarInfo, top: str, expected: Mapping[str, bytes]) -> str | None:
    """What makes ``member`` other than one of the ``expected`` ``{name: tar type}`` (its name, its type), or None."""
    name = member.name
    parts = name.split("/")
    if name.startswith("/"):
        return f"holds {name!r}, an absolute path"
    if ".." in parts:
        return f"holds {name!r}, a path with '..'"
    if "" in parts or "." in parts:
        return f"holds {name!r}, not a plain path"
    if parts[0] != top:
        return f"holds {name!r}, outside its one directory {top}/"
    if member.type in _LINKS_AND_DEVICES:
        to = f" to {member.linkname!r}" if member.issym() or member.islnk() else ""
        return f"holds {name!r}, {_LINKS_AND_DEVICES[member.type]}{to}"
    if name not in expected:
        return f"holds {name!r}, which the release does not put in it (only {', '.join(sorted(expected))})"
    if member.type != expected[name]:
        return f"holds {name!r} as {'a directory' if member.isdir() else 'another kind of file'}, " + (
            "not a directory" if expected[name] == tarfile.DIRTYPE else "not a regular file"
        )
    return None


def _stamp_problem(member: tarfile.TarInfo, mtime: int) -> str | None:
    """How ``member`` is stamped otherwise than the release stamps it (owner, mode, mtime), or None."""
    if (member.uid, member.gid) != (0, 0) or (member.uname, member.gname) != ("", ""):
        return (
            f"has {member.name!r} owned by uid {member.uid} gid {member.gid} ({member.uname!r}:{member.gname!r}), "
            "not 0 0 without names"
        )
    if member.mode != TARBALL_MODE:
        return f"has {member.name!r} of mode {member.mode:o}, not {TARBALL_MODE:o}"
    if member.mtime != mtime:
        return f"has {member.name!r} of mtime {member.mtime}, not the manifest's source_date_epoch {mtime}"
    return None


def release_binary(tarball: Path, binary: str, mtime: int, *, limit: int = 1 << 30) -> bytes:
    """The binary ``<top>/<bin>`` of a release tarball, every member checked first: exactly the directory ``<top>``
    and that regular file, safe names, no link nor device, owner 0 without names, mode 0755 and mtime ``mtime``
    (the manifest's source_date_epoch), as :func:`binary_tarball` writes them. Anything else, or a file that is not
    a whole .tar.gz, is one :class:`CheckFailed` line naming the tarball and the member."""
    top = binary.split("/", maxsplit=1)[0]
    expected = {top: tarfile.DIRTYPE, binary: tarfile.REGTYPE}
    try:
        raw = _gunzip(tarball.read_bytes(), limit)
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
            members = tar.getmembers()
            seen: dict[str, tarfile.TarInfo] = {}
            for member in members:
                problem = _member_problem(member, top, expected)
                if problem is None and member.name in seen:
                    problem = f"holds {member.name!r} twice"
                if problem:
                    raise CheckFailed(f"{tarball.name} {problem}", _TARBALL_HINT)
                seen[member.name] = member
            for name in expected:
                if name not in seen:
                    raise CheckFailed(f"{tarball.name} has no {name}", _TARBALL_HINT)
            for member in members:
                problem = _stamp_problem(member, mtime)
                if problem:
                    raise CheckFailed(f"{tarball.name} {problem}, as the release writes it", _TARBALL_HINT)
            stream = tar.extractfile(seen[binary])
            if stream is None:  # not reached: a regular file, checked above
                raise CheckFailed(f"{binary} in {tarball.name} is not a file", _TARBALL_HINT)
            return stream.read()  # tarfile refuses a member cut short (unexpected end of data)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise CheckFailed(f"{tarball.name} is not a whole .tar.gz: {exc}", _TARBALL_HINT) from exc


def _gunzip(data: bytes, limit: int) -> bytes:
    """The one gzip stream of ``data``, whole (its CRC and length checked), at most ``limit`` bytes."""
    inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        raw = inflate.decompress(data, limit + 1)
    except zlib.error as exc:
        raise OSError(f"not gzip data ({exc})") from exc
    if len(raw) > limit:
        raise OSError(f"it unpacks to more than {limit} bytes")
    if not inflate.eof:
        raise EOFError("the gzip stream ends early (truncated)")
    if inflate.unused_data:
        raise OSError(f"data follows the gzip stream ({len(inflate.unused_data)} bytes)")
    return raw


def sha256sums_text(sums: Mapping[str, str]) -> str:
    """``sha256sum`` format, one line per file, sorted by name (``sha256sum -c`` reads it)."""
    return "".join(f"{digest}  {name}\n" for name, digest in sorted(sums.items()))


_SUM_LINE = re.compile(r"^(?P<digest>[0-9a-f]{64}) [ *](?P<name>\S.*)$")


def sum_name_problem(name: str) -> str | None:
    """What makes ``name`` not a plain file name of a release's folder (a path, ``..``, a hidden file), or None."""
    parts = name.split("/")
    if name.startswith("/"):
        return "an absolute path"
    if ".." in parts:
        return "a path with '..'"
    if len(parts) > 1:
        return "a path into a folder, not a file name"
    if name.startswith("."):
        return "a hidden file"
    return None


def parse_sha256sums(text: str) -> dict[str, str]:
    """``{file name: sha256}`` of a SHA256SUMS file; a malformed line, a name that is not a plain file name of the
    release's folder, or a name listed twice is a :class:`CheckFailed`."""
    sums: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        match = _SUM_LINE.match(line)
        if not match:
            raise CheckFailed(f"SHA256SUMS line {number} is not '<sha256>  <file>': {line[:80]!r}", "re-download it")
        name = match.group("name")
        problem = sum_name_problem(name)
        if problem:
            raise CheckFailed(
                f"SHA256SUMS line {number} names {name!r}, {problem}: a release lists only the files of its folder",
                "download SHA256SUMS again from the release",
            )
        if name in sums:
            raise CheckFailed(f"SHA256SUMS line {number} lists {name} a second time", "re-download it")
        sums[name] = match.group("digest")
    return sums


# --- cargo metadata: packages whose identity depends on where the source is ---------------------


def outside_workspace(metadata: Mapping[str, object]) -> list[str]:
    """``"name (manifest path)"`` of the path packages outside the workspace root, from ``cargo metadata``.

    Cargo hashes a path package's location relative to the workspace root into its ``-C metadata``, but
    the absolute location when it is outside the root: its crate identity then depends on the checkout's path.
    """
    root = Path(str(metadata["workspace_root"]))
    packages = metadata.get("packages", [])
    found = []
    for package in packages if isinstance(packages, list) else []:
        if package.get("source") is not None:
            continue
        manifest = Path(str(package["manifest_path"]))
        if not manifest.is_relative_to(root):
            found.append(f"{package['name']} ({manifest})")
    return sorted(found)


# --- cargo's -v log: which units were compiled, which were fresh ---------------------------------

_UNIT = re.compile(r"^\s+(?P<state>Compiling|Fresh) (?P<name>\S+) v(?P<version>\S+)")


def unit_states(log_text: str) -> dict[str, str]:
    """``{package: "Compiling" | "Fresh"}`` from cargo's ``-v`` output (its status lines)."""
    return {m.group("name"): m.group("state") for line in log_text.splitlines() if (m := _UNIT.match(line))}


# --- where two binaries differ -------------------------------------------------------------------


def differing_bytes(first: bytes, second: bytes) -> int:
    """How many byte positions differ, the length difference counted as differing bytes."""
    common = min(len(first), len(second))
    same = sum(1 for a, b in zip(first[:common], second[:common], strict=True) if a == b)
    return common - same + abs(len(first) - len(second))


def _sections(path: Path) -> dict[str, bytes]:
    try:
        with path.open("rb") as stream:
            elf = ELFFile(stream)
            return {
                str(section.name): (b"" if section["sh_type"] == "SHT_NOBITS" else bytes(section.data()))
                + section["sh_size"].to_bytes(8, "little")
                for section in elf.iter_sections()
                if section.name
            }
    except ELFError as exc:
        raise CheckFailed(f"{path} is not an ELF binary: {exc}", "compare the files by hand") from exc


def differing_sections(first: Path, second: Path) -> list[str]:
    """The ELF sections (by name) whose content or size differs, or that only one binary has."""
    a, b = _sections(first), _sections(second)
    return sorted(name for name in a.keys() | b.keys() if a.get(name) != b.get(name))


@dataclass(frozen=True)
class BinaryDiff:
    differing_bytes: int
    sizes: tuple[int, int]
    sections: tuple[str, ...]

    def line(self) -> str:
        where = ", ".join(self.sections) if self.sections else "no section (headers only)"
        return f"{self.differing_bytes} bytes differ (sizes {self.sizes[0]} and {self.sizes[1]}), in {where}"


def binary_diff(first: Path, second: Path) -> BinaryDiff:
    a, b = first.read_bytes(), second.read_bytes()
    return BinaryDiff(differing_bytes(a, b), (len(a), len(b)), tuple(differing_sections(first, second)))


# --- git ----------------------------------------------------------------------------------------

_GIT_ENV = {"LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}


def git(repo: Path, *args: str, env: Mapping[str, str], strip: bool = True) -> str:
    text = capture(["git", "-C", str(repo), *args], env={**env, **_GIT_ENV})
    return text.strip() if strip else text


def repo_root(path: Path, env: Mapping[str, str]) -> Path:
    """The top of the git repository that holds ``path``."""
    directory = path if path.is_dir() else path.parent
    if not directory.is_dir():
        raise MissingInput(f"{directory} does not exist", "set PGO_MANIFEST to the crate's Cargo.toml")
    try:
        root = Path(git(directory, "rev-parse", "--show-toplevel", env=env))
    except CommandFailed as exc:
        raise MissingInput(
            f"{directory} is not in a git repository (releases and determinism builds are made from a commit)",
            f"make it one, with a tag: {make_repo_commands(directory)}",
        ) from exc
    try:
        git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", env=env)
    except CommandFailed as exc:
        raise MissingInput(
            f"the git repository {root} has no commit yet (releases and determinism builds are made from one)",
            f"commit it, with a tag: {make_repo_commands(root, init=False)}",
        ) from exc
    return root


def make_repo_commands(directory: Path, *, init: bool = True) -> str:
    """The shell commands that make ``directory`` a git repository with one commit tagged v0.1.0 (build output
    ignored: it must not be committed, nor make the worktree dirty)."""
    steps = [f"cd {shlex.quote(str(directory))}"]
    if init:
        steps.append("git init")
    steps += [
        r"printf '/target/\n/dist/\n' >> .gitignore",
        "git add -A",
        "git commit -m 'v0.1.0'",
        "git tag v0.1.0",
    ]
    return " && ".join(steps)


def tag_commit(repo: Path, tag: str, env: Mapping[str, str]) -> str:
    """The commit a tag names, or a :class:`MissingInput` saying it does not exist."""
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"refs/tags/{tag}^{{commit}}", env=env)
    except CommandFailed as exc:
        raise MissingInput(f"tag {tag} does not exist in {repo}", "see `git tag --list`; fetch the tags?") from exc


def commit_time(repo: Path, commit: str, env: Mapping[str, str]) -> int:
    return int(git(repo, "show", "-s", "--format=%ct", commit, env=env))


def dirty_paths(repo: Path, env: Mapping[str, str]) -> list[str]:
    """What ``git status`` lists (modified, staged, untracked but not ignored)."""
    text = git(repo, "status", "--porcelain=v1", "--untracked-files=all", env=env, strip=False)
    return [line[3:] for line in text.splitlines() if line.strip()]
