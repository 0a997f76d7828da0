"""The pure pieces of a reproducible release: tags, the environment, remap flags, tarballs, SHA256SUMS, diffs."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from recipes.errors import CheckFailed, ConfigError, EnvironmentRefused, MissingInput
from recipes.release.make import check_new_folder, leaked_paths, relative_to_repo
from recipes.release.reproducible import (
    Names,
    binary_tarball,
    check_tag,
    differing_bytes,
    differing_sections,
    outside_workspace,
    parse_sha256sums,
    release_binary,
    remap_flags,
    remap_pairs,
    remap_roles,
    repo_root,
    reproducible_env,
    sha256sums_text,
    split_tag,
    tag_commit,
    take_option,
    tar_member,
    tarball_bytes,
    unit_states,
    without_remap,
)
from tests.conftest import DATA, clean_env


@pytest.mark.parametrize("tag", ["v1.2.3", "v0.13.0", "v10.0.1", "v1.0.0-rc.1"])
def test_release_tags(tag: str) -> None:
    assert check_tag(tag) == tag


@pytest.mark.refuses("tag-not-vx-y-z")
@pytest.mark.parametrize("tag", ["1.2.3", "v1.2", "v1.2.3.4", "v01.2.3", "release", "v1.2.3-", "v1.2.3 ", "v1.2.3\n"])
def test_ill_formed_tags_refused(tag: str) -> None:
    with pytest.raises(ConfigError, match="is not a release tag"):
        check_tag(tag)


@pytest.mark.refuses("no-release-tag-given")
def test_tag_is_split_off_before_the_options() -> None:
    assert split_tag(["v1.2.3", "--min-functions", "3"], "release") == ("v1.2.3", ["--min-functions", "3"])
    with pytest.raises(ConfigError, match="needs a release tag first"):
        split_tag([], "release")
    with pytest.raises(ConfigError, match="needs a release tag first"):
        split_tag(["--min-functions", "3"], "rebuild")


@pytest.mark.refuses("option-without-value")
def test_take_option_both_spellings() -> None:
    assert take_option(["--artefacts", "d", "--x", "1"], "--artefacts") == ("d", ["--x", "1"])
    assert take_option(["--artefacts=d"], "--artefacts") == ("d", [])
    assert take_option(["--x", "1"], "--artefacts") == (None, ["--x", "1"])
    with pytest.raises(ConfigError, match="needs a value"):
        take_option(["--artefacts"], "--artefacts")


def test_reproducible_env_is_a_new_fixed_mapping() -> None:
    base = {"PATH": "/bin", "LC_TIME": "de_DE.UTF-8", "LANG": "fr_FR", "CARGO_TARGET_DIR": "/shared", "TZ": "CET"}
    env = reproducible_env(base, 1700000000)
    assert env["SOURCE_DATE_EPOCH"] == "1700000000"
    assert env["LC_ALL"] == env["LANG"] == "C"
    assert env["TZ"] == "UTC"
    assert env["CARGO_TERM_COLOR"] == "never"
    assert "LC_TIME" not in env and "CARGO_TARGET_DIR" not in env
    assert base["LANG"] == "fr_FR" and "SOURCE_DATE_EPOCH" not in base


def test_remap_pairs_most_specific_last_and_both_forms_of_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real-src"
    real.mkdir()
    link = tmp_path / "src"
    link.symlink_to(real)
    sysroot = Path("/opt/rust")
    pairs = remap_pairs(
        source_root=link,
        work=link / "target" / "pgo",
        cargo_home=Path("/h/.cargo"),
        sysroot=sysroot,
        rustc_commit="abc",
    )
    as_dict = dict(pairs)
    assert as_dict[str(link)] == as_dict[str(real)] == "/build/src"
    assert as_dict[str(link / "target" / "pgo")] == "/build/work"
    assert as_dict["/opt/rust/lib/rustlib/src/rust"] == "/rustc/abc"
    assert as_dict["/opt/rust"] == "/rustc/sysroot"
    order = [src for src, _ in pairs]
    assert order.index(str(link)) < order.index(str(link / "target" / "pgo"))  # rustc: the last match wins
    assert order.index("/opt/rust") < order.index("/opt/rust/lib/rustlib/src/rust")
    flags = remap_flags(pairs)
    assert f"--remap-path-prefix={link}=/build/src" in flags


def test_remap_roles_name_what_each_remapped_path_is_the_same_for_every_machine(tmp_path: Path) -> None:
    """What a release manifest records of the remapping: each neutral path of remap_pairs, named by what it replaces,
    in one order; two checkouts, work dirs and homes give the same."""
    roles = remap_roles("abc")
    assert roles == (
        ("<rustc sysroot>", "/rustc/sysroot"),
        ("<rustc sysroot>/lib/rustlib/src/rust", "/rustc/abc"),
        ("<cargo home>", "/cargo"),
        ("<checkout>", "/build/src"),
        ("<work dir>", "/build/work"),
    )
    for root in (tmp_path / "a", tmp_path / "elsewhere" / "b"):
        pairs = remap_pairs(
            source_root=root, work=root / "w", cargo_home=root / "c", sysroot=root / "s", rustc_commit="abc"
        )
        assert {neutral for _, neutral in pairs} == {neutral for _, neutral in roles}


@pytest.mark.refuses("path-white-space-remap")
def test_remap_of_a_path_with_spaces_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="white space"):
        remap_pairs(
            source_root=tmp_path / "my src", work=tmp_path, cargo_home=tmp_path, sysroot=tmp_path, rustc_commit="x"
        )


@pytest.mark.refuses("remap-path-prefix-given-two-words")
def test_without_remap() -> None:
    flags = ["--remap-path-prefix=/a=/b", "-Cforce-frame-pointers=yes", "--remap-path-prefix=/c=/d"]
    assert without_remap(flags) == ["-Cforce-frame-pointers=yes"]
    with pytest.raises(ConfigError, match="two words"):
        without_remap(["--remap-path-prefix", "/a=/b"])


def test_tarball_is_deterministic_owner_0_sorted_fixed_times() -> None:
    files = {"top/zeta": (b"z" * 10, 0o644), "top/bin/tool": (b"\x7fELF...", 0o755), "top/alpha": (b"a", 0o600)}
    first = tarball_bytes(files, mtime=1700000000)
    again = tarball_bytes(dict(reversed(list(files.items()))), mtime=1700000000)
    assert first == again
    assert first[:2] == b"\x1f\x8b"
    assert first[3] & 0x08 == 0, "no file name in the gzip header"
    assert first[4:8] == b"\0\0\0\0", "gzip mtime 0"
    assert tarball_bytes(files, mtime=1700000001) != first
    with tarfile.open(fileobj=io.BytesIO(first), mode="r:gz") as tar:
        members = tar.getmembers()
        names = [m.name for m in members]
        assert names == sorted(names) == ["top", "top/alpha", "top/bin", "top/bin/tool", "top/zeta"]
        for member in members:
            assert (member.uid, member.gid, member.uname, member.gname) == (0, 0, "", "")
            assert member.mtime == 1700000000
        assert tar.getmember("top/bin/tool").mode == 0o755
        assert tar.getmember("top").isdir()
    # GNU tar reads it too, and sees the same
    listing = subprocess.run(
        ["tar", "tvzf", "-", "--numeric-owner"], input=first, capture_output=True, check=True
    ).stdout.decode()
    assert "0/0" in listing and "top/bin/tool" in listing


def test_binary_tarball_member(tmp_path: Path) -> None:
    names = Names("hello-pgo", "v1.2.3", "x86_64-unknown-linux-gnu")
    assert names.pgo_tarball == "hello-pgo-v1.2.3-x86_64-unknown-linux-gnu-pgo.tar.gz"
    assert names.plain_tarball == "hello-pgo-v1.2.3-x86_64-unknown-linux-gnu.tar.gz"
    assert names.profile == "hello-pgo-v1.2.3-x86_64-unknown-linux-gnu-pgo.profdata"
    path = tmp_path / names.pgo_tarball
    path.write_bytes(binary_tarball("hello-pgo", b"binary", names.pgo_top, 5))
    assert tar_member(path, f"{names.pgo_top}/hello-pgo") == b"binary"


@pytest.mark.refuses("tarball-lacks-member-member-not-file")
def test_a_tarball_without_the_binary_refused(tmp_path: Path) -> None:
    names = Names("hello-pgo", "v1.2.3", "x86_64-unknown-linux-gnu")
    path = tmp_path / names.pgo_tarball
    path.write_bytes(binary_tarball("other-bin", b"binary", names.pgo_top, 5))
    with pytest.raises(
        MissingInput, match=rf"{names.pgo_tarball} has no {names.pgo_top}/hello-pgo \(is it the release"
    ):
        tar_member(path, f"{names.pgo_top}/hello-pgo")


@pytest.mark.refuses("tarball-lacks-member-member-not-file")
def test_a_tarball_whose_binary_is_a_directory_refused(tmp_path: Path) -> None:
    """Made by tar itself: top/hello-pgo is a directory, not the binary."""
    (tmp_path / "top" / "hello-pgo").mkdir(parents=True)
    (tmp_path / "top" / "hello-pgo" / "README").write_text("not a binary\n")
    path = tmp_path / "x.tar.gz"
    subprocess.run(["tar", "-czf", str(path), "-C", str(tmp_path), "top"], check=True)
    with pytest.raises(MissingInput, match=r"top/hello-pgo in x.tar.gz is not a file \(is it the release's tarball"):
        tar_member(path, "top/hello-pgo")


def test_sha256sums_round_trip_and_real_sha256sum_output(tmp_path: Path) -> None:
    (tmp_path / "b.tar.gz").write_bytes(b"bee")
    (tmp_path / "a.profdata").write_bytes(b"ay")
    real = subprocess.run(
        ["sha256sum", "b.tar.gz", "a.profdata"], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    sums = parse_sha256sums(real)
    assert set(sums) == {"a.profdata", "b.tar.gz"}
    text = sha256sums_text(sums)
    assert text.splitlines()[0].endswith("  a.profdata")
    (tmp_path / "SHA256SUMS").write_text(text)
    subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=tmp_path, check=True)
    assert parse_sha256sums(text) == sums


@pytest.mark.refuses("malformed-sha256sums-line")
def test_malformed_sha256sums_line_refused() -> None:
    with pytest.raises(CheckFailed, match="line 2"):
        parse_sha256sums("0" * 64 + "  a\nnot a line\n")


def test_unit_states_of_a_real_cargo_log() -> None:
    log = (DATA / "cargo-build-layered-touched.log").read_text()
    assert unit_states(log) == {"shapes": "Compiling", "tally": "Fresh", "layered-app": "Compiling"}


def test_differing_bytes() -> None:
    assert differing_bytes(b"abcd", b"abcd") == 0
    assert differing_bytes(b"abcd", b"abXd") == 1
    assert differing_bytes(b"abcd", b"abcdef") == 2


def test_differing_sections_of_real_binaries() -> None:
    true, false = Path("/bin/true"), Path("/bin/false")
    assert differing_sections(true, true) == []
    sections = differing_sections(true, false)
    assert ".note.gnu.build-id" in sections
    assert ".shstrtab" not in sections


@pytest.mark.refuses("differing-binaries-not-elf")
def test_differing_sections_of_a_non_elf_refused(tmp_path: Path) -> None:
    text = tmp_path / "text"
    text.write_text("not an ELF file")
    with pytest.raises(CheckFailed, match="not an ELF binary"):
        differing_sections(text, Path("/bin/true"))


def test_leaked_paths() -> None:
    pairs = (("/home/me/src", "/build/src"), ("/home/me/.cargo", "/cargo"))
    assert leaked_paths(b"panicked at /home/me/src/lib.rs", pairs) == ["/home/me/src"]
    assert leaked_paths(b"panicked at /build/src/lib.rs", pairs) == []
    short = (("/src", "/build/src"), ("/usr", "/rustc/sysroot"))
    assert leaked_paths(b"at /build/src/lib.rs, see /usr/share/doc", short) == []


def test_path_packages_outside_the_workspace_from_real_cargo_metadata() -> None:
    metadata = json.loads((DATA / "cargo-metadata-outside-workspace.json").read_text())
    assert outside_workspace(metadata) == [
        "shapes (/work/layered-outside/shapes/Cargo.toml)",
        "tally (/work/layered-outside/tally/Cargo.toml)",
    ]
    inside = {**metadata, "workspace_root": "/work/layered-outside"}
    assert outside_workspace(inside) == []


def _git_env(ceiling: Path) -> dict[str, str]:
    """A git that sees no repository above ``ceiling`` and can commit (as a user with a name would)."""
    env = clean_env({"GIT_CEILING_DIRECTORIES": str(ceiling), "LC_ALL": "C"})
    for who in ("AUTHOR", "COMMITTER"):
        env.update({f"GIT_{who}_NAME": "t", f"GIT_{who}_EMAIL": "t@example.org"})
    return env


def _git(repo: Path, env: dict[str, str], *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True).stdout


@pytest.mark.refuses("crate-directory-does-not-exist")
def test_a_crate_directory_that_does_not_exist_refused(tmp_path: Path) -> None:
    gone = tmp_path / "moved-away"
    with pytest.raises(MissingInput, match=rf"{gone} does not exist \(set PGO_MANIFEST to the crate's Cargo.toml\)"):
        repo_root(gone / "Cargo.toml", _git_env(tmp_path))


@pytest.mark.refuses("crate-not-git-repository")
def test_outside_git_refused_with_the_commands_that_make_a_tagged_repository(tmp_path: Path) -> None:
    """release and determinism start with repo_root: outside git, the hint's commands (run as they are, in a
    shell) make the crate a repository whose tag v0.1.0 is its HEAD, build output ignored."""
    crate = tmp_path / "my crate"
    (crate / "src").mkdir(parents=True)
    (crate / "Cargo.toml").write_text('[package]\nname = "x"\nversion = "0.1.0"\n')
    (crate / "src" / "main.rs").write_text("fn main() {}\n")
    (crate / "target" / "release").mkdir(parents=True)
    (crate / "target" / "release" / "x").write_bytes(b"built")
    env = _git_env(tmp_path)
    with pytest.raises(MissingInput) as caught:
        repo_root(crate / "Cargo.toml", env)
    error = caught.value
    assert error.message == (
        f"{crate} is not in a git repository (releases and determinism builds are made from a commit)"
    )
    assert error.hint.startswith("make it one, with a tag: cd ")
    assert "\n" not in error.line()
    commands = error.hint.removeprefix("make it one, with a tag: ")
    subprocess.run(["sh", "-c", commands], env=env, check=True, capture_output=True)
    root = repo_root(crate / "Cargo.toml", env)
    assert root == crate
    assert tag_commit(root, "v0.1.0", env) == _git(crate, env, "rev-parse", "HEAD").strip()
    assert _git(crate, env, "status", "--porcelain") == ""  # target/ ignored, the rest committed: a clean worktree
    assert _git(crate, env, "ls-files").split() == [".gitignore", "Cargo.toml", "src/main.rs"]


@pytest.mark.refuses("git-repository-has-no-commit")
def test_repository_without_a_commit_refused_with_the_commands(tmp_path: Path) -> None:
    crate = tmp_path / "crate"
    crate.mkdir()
    (crate / "Cargo.toml").write_text('[package]\nname = "x"\nversion = "0.1.0"\n')
    env = _git_env(tmp_path)
    subprocess.run(["git", "init", "-q", str(crate)], env=env, check=True)
    with pytest.raises(MissingInput, match=r"the git repository .*/crate has no commit yet") as caught:
        repo_root(crate / "Cargo.toml", env)
    commands = caught.value.hint.removeprefix("commit it, with a tag: ")
    assert "git init" not in commands
    subprocess.run(["sh", "-c", commands], env=env, check=True, capture_output=True)
    assert tag_commit(repo_root(crate / "Cargo.toml", env), "v0.1.0", env)


@pytest.mark.refuses("crate-not-inside-repository")
def test_a_crate_outside_the_repository_refused(tmp_path: Path) -> None:
    """A manifest reached through a symlink into another tree: resolved, it is not under the repository."""
    (tmp_path / "repo").mkdir()
    (tmp_path / "elsewhere" / "crate").mkdir(parents=True)
    (tmp_path / "elsewhere" / "crate" / "Cargo.toml").write_text("[package]\n")
    (tmp_path / "repo" / "crate").symlink_to(tmp_path / "elsewhere" / "crate")
    manifest = tmp_path / "repo" / "crate" / "Cargo.toml"
    with pytest.raises(ConfigError, match=rf"the manifest {manifest} is not inside the repository {tmp_path / 'repo'}"):
        relative_to_repo(manifest, tmp_path / "repo", "the manifest")
    assert relative_to_repo(tmp_path / "repo" / "x" / "Cargo.toml", tmp_path / "repo", "the manifest") == "x/Cargo.toml"


# --- release_binary: every member of a release tarball, as verify and rebuild read it ---------------------------

TOP = "hello-pgo-v1.2.3-x86_64-unknown-linux-gnu-pgo"
BIN = f"{TOP}/hello-pgo"
MTIME = 1772600767


def _member(
    name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", **attrs: object
) -> tuple[tarfile.TarInfo, bytes]:
    """A tar member stamped as the release stamps it (owner 0 without names, mode 0755, the epoch), then ``attrs``."""
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode, info.mtime, info.uid, info.gid, info.uname, info.gname = 0o755, MTIME, 0, 0, "", ""
    for key, value in attrs.items():
        setattr(info, key, value)
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info, data


def _tarball(path: Path, *members: tuple[tarfile.TarInfo, bytes]) -> Path:
    """A .tar.gz of exactly ``members``, written by Python's tarfile."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    path.write_bytes(gzip.compress(raw.getvalue(), mtime=0))
    return path


def _good() -> list[tuple[tarfile.TarInfo, bytes]]:
    return [_member(TOP, tarfile.DIRTYPE), _member(BIN, data=b"binary")]


def test_release_binary_of_the_tarball_the_release_writes(tmp_path: Path) -> None:
    path = tmp_path / "x.tar.gz"
    path.write_bytes(binary_tarball("hello-pgo", b"binary", TOP, MTIME))
    assert release_binary(path, BIN, MTIME) == b"binary"
    assert release_binary(_tarball(tmp_path / "y.tar.gz", *_good()), BIN, MTIME) == b"binary"


@pytest.mark.refuses("verify-rebuild-tarball-holds-link-device-fifo", "verify-rebuild-tarball-member-owner-mode-mtime")
@pytest.mark.parametrize(
    ("members", "words"),
    [
        pytest.param(
            [_member(TOP, tarfile.DIRTYPE), _member(BIN, tarfile.SYMTYPE, linkname="/etc/passwd")],
            f"holds '{BIN}', a symbolic link to '/etc/passwd'",
            id="symlink",
        ),
        pytest.param(
            [*_good(), _member(f"{TOP}/copy", tarfile.LNKTYPE, linkname=BIN)],
            f"holds '{TOP}/copy', a hard link to '{BIN}'",
            id="hardlink",
        ),
        pytest.param([*_good(), _member("../x", data=b"x")], "holds '../x', a path with '..'", id="dotdot"),
        pytest.param(
            [*_good(), _member(f"{TOP}/../../x", data=b"x")],
            f"holds '{TOP}/../../x', a path with '..'",
            id="inner-dotdot",
        ),
        pytest.param(
            [*_good(), _member("/etc/passwd", data=b"x")], "holds '/etc/passwd', an absolute path", id="absolute"
        ),
        pytest.param(
            [*_good(), _member(f"{TOP}/tty", tarfile.CHRTYPE, devmajor=5, devminor=0)],
            f"holds '{TOP}/tty', a character device",
            id="device",
        ),
        pytest.param([*_good(), _member(f"{TOP}/pipe", tarfile.FIFOTYPE)], f"holds '{TOP}/pipe', a fifo", id="fifo"),
        pytest.param(
            [*_good(), _member("other", tarfile.DIRTYPE)],
            f"holds 'other', outside its one directory {TOP}/",
            id="two-tops",
        ),
        pytest.param(
            [*_good(), _member(f"{TOP}/extra.sh", data=b"#!/bin/sh\n")],
            f"holds '{TOP}/extra.sh', which the release does not put in it",
            id="extra-file",
        ),
        pytest.param([*_good(), _member(f"./{BIN}", data=b"x")], f"holds './{BIN}', not a plain path", id="dot-slash"),
        pytest.param([*_good(), _member(BIN, data=b"other")], f"holds '{BIN}' twice", id="twice"),
        pytest.param(
            [_member(TOP, tarfile.DIRTYPE), _member(BIN, tarfile.DIRTYPE)],
            f"holds '{BIN}' as a directory, not a regular file",
            id="binary-a-directory",
        ),
        pytest.param([_member(TOP, tarfile.DIRTYPE)], f"has no {BIN}", id="no-binary"),
        pytest.param([_member(BIN, data=b"binary")], f"has no {TOP}", id="no-directory"),
        pytest.param(
            [_member(TOP, tarfile.DIRTYPE), _member(BIN, data=b"binary", uid=1000)],
            f"has '{BIN}' owned by uid 1000 gid 0 ('':''), not 0 0 without names",
            id="uid-1000",
        ),
        pytest.param(
            [_member(TOP, tarfile.DIRTYPE, gid=1000, uname="someone"), _member(BIN, data=b"binary")],
            f"has '{TOP}' owned by uid 0 gid 1000 ('someone':''), not 0 0 without names",
            id="gid-and-name",
        ),
        pytest.param(
            [_member(TOP, tarfile.DIRTYPE), _member(BIN, data=b"binary", mode=0o4755)],
            f"has '{BIN}' of mode 4755, not 755",
            id="setuid",
        ),
        pytest.param(
            [_member(TOP, tarfile.DIRTYPE, mode=0o777), _member(BIN, data=b"binary")],
            f"has '{TOP}' of mode 777, not 755",
            id="mode",
        ),
        pytest.param(
            [_member(TOP, tarfile.DIRTYPE), _member(BIN, data=b"binary", mtime=MTIME + 60)],
            f"has '{BIN}' of mtime {MTIME + 60}, not the manifest's source_date_epoch {MTIME}",
            id="mtime",
        ),
    ],
)
def test_a_tarball_with_a_member_the_release_does_not_write_refused(
    tmp_path: Path, members: list[tuple[tarfile.TarInfo, bytes]], words: str
) -> None:
    path = _tarball(tmp_path / "x.tar.gz", *members)
    with pytest.raises(CheckFailed) as caught:
        release_binary(path, BIN, MTIME)
    line = caught.value.line()
    assert line.startswith(f"x.tar.gz {words}") and "\n" not in line, line
    assert line.endswith("(it is not a tarball the release writes: download the release again)"), line


def _whole() -> bytes:
    return binary_tarball("hello-pgo", b"binary" * 1000, TOP, MTIME)


@pytest.mark.refuses("verify-rebuild-tarball-not-gzip-not-tar")
@pytest.mark.parametrize(
    ("content", "words"),
    [
        pytest.param(b"", "the gzip stream ends early (truncated)", id="empty"),
        pytest.param(b"not a tarball", "not gzip data", id="not-gzip"),
        pytest.param(gzip.compress(b"x" * 2000), "invalid header", id="gzip-not-tar"),
        pytest.param(_whole()[:40], "the gzip stream ends early (truncated)", id="cut-in-the-stream"),
        pytest.param(_whole()[:-4], "the gzip stream ends early (truncated)", id="cut-in-the-trailer"),
        pytest.param(_whole() + b"\0", "data follows the gzip stream (1 bytes)", id="trailing-bytes"),
        pytest.param(
            gzip.compress(gzip.decompress(_whole())[:1536], mtime=0),
            "unexpected end of data",
            id="tar-cut-in-the-binary",
        ),
    ],
)
def test_a_tarball_that_is_not_a_whole_tar_gz_refused(tmp_path: Path, content: bytes, words: str) -> None:
    path = tmp_path / "x.tar.gz"
    path.write_bytes(content)
    with pytest.raises(CheckFailed) as caught:
        release_binary(path, BIN, MTIME)
    line = caught.value.line()
    assert line.startswith("x.tar.gz is not a whole .tar.gz: ") and words in line and "\n" not in line, line


@pytest.mark.refuses("release-artefacts-folder-dangling-symbolic-link-under")
def test_a_release_folder_that_cannot_be_made_refused_before_anything_is_built(tmp_path: Path) -> None:
    check_new_folder(tmp_path / "new" / "v1.2.3")  # not there yet: made by the release
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "gone")
    with pytest.raises(EnvironmentRefused) as caught:
        check_new_folder(dangling)
    assert caught.value.line() == (
        f"the release folder {dangling} is a dangling symbolic link (to {tmp_path / 'gone'}) "
        "(remove the link, or give --artefacts a folder that does not exist yet)"
    )
    with pytest.raises(EnvironmentRefused, match=rf"{dangling / 'v1.2.3'} is under {dangling}, a dangling symbolic"):
        check_new_folder(dangling / "v1.2.3")
    (tmp_path / "file").write_text("a file")
    with pytest.raises(EnvironmentRefused, match=rf"cannot be made: {tmp_path / 'file'} is not a directory"):
        check_new_folder(tmp_path / "file" / "v1.2.3")


@pytest.mark.refuses("verify-rebuild-tarball-not-gzip-not-tar")
def test_a_tarball_that_unpacks_to_more_than_the_limit_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.tar.gz"
    path.write_bytes(binary_tarball("hello-pgo", b"\0" * 100_000, TOP, MTIME))
    with pytest.raises(CheckFailed, match=r"x.tar.gz is not a whole .tar.gz: it unpacks to more than 4096 bytes"):
        release_binary(path, BIN, MTIME, limit=4096)
