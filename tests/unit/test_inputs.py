"""The one reader (recipes/inputs.py): garbage in, one PgoError line out, never another exception."""

from __future__ import annotations

import contextlib
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from recipes.errors import ConfigError, PgoError, WorkDirError
from recipes.inputs import Fields, Table, not_a_file, parse_toml, read_bytes, read_json, read_text


def read_toml(path: Path, what: str, error: type[PgoError], hint: str) -> dict[str, Any]:
    """The TOML document of ``path`` (``parse_toml``), as a file is read whole."""
    return parse_toml(read_text(path, what, error, hint), f"{what} {path}", error, hint, invalid=" is")


def test_a_missing_file_a_directory_and_a_dangling_symlink_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"the workload .*nope\.toml does not exist"):
        read_text(tmp_path / "nope.toml", "the workload", ConfigError, "fix it")
    with pytest.raises(ConfigError, match="is a directory, not a file"):
        read_text(tmp_path, "the workload", ConfigError, "fix it")
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    with pytest.raises(ConfigError, match="dangling symlink"):
        read_bytes(tmp_path / "link", "the workload", ConfigError, "fix it")


def test_bytes_that_are_not_utf8_name_the_line_and_offset(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    path.write_bytes(b"[workload]\ndescription = '\xff'\n")
    with pytest.raises(ConfigError) as caught:
        read_toml(path, "the workload", ConfigError, "save it as UTF-8")
    assert caught.value.line() == (
        f"the workload {path} is not UTF-8 text (byte 0xff on line 2, offset 26) (save it as UTF-8)"
    )


def test_invalid_toml_and_json_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("[workload\n")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        read_toml(path, "the workload", ConfigError, "")
    path.write_text('{"a": ')
    with pytest.raises(WorkDirError, match="is not valid JSON"):
        read_json(path, "the report", WorkDirError, "")
    path.write_text('{"a": NaN}')
    with pytest.raises(WorkDirError, match="NaN is not a JSON number"):
        read_json(path, "the report", WorkDirError, "")
    path.write_text('{"seconds": 1e400}')  # Python's float: infinity, a figure no stage wrote
    with pytest.raises(WorkDirError, match=r"is not valid JSON: the number 1e400 is beyond a 64-bit float$"):
        read_json(path, "the report", WorkDirError, "")
    path.write_text('{"seconds": -' + "9" * 400 + ".5}")
    with pytest.raises(WorkDirError, match=r"the number -9999999999999999999… is beyond a 64-bit float$"):
        read_json(path, "the report", WorkDirError, "")
    path.write_text('{"seconds": 1.5e300, "n": ' + "9" * 400 + "}")  # a large float and an int: both read
    assert read_json(path, "the report", WorkDirError, "")["seconds"] == 1.5e300
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(WorkDirError, match="is not valid JSON"):
        read_json(path, "the report", WorkDirError, "")


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(b"x" * 100)
    with pytest.raises(ConfigError, match="is 100 bytes, more than the 10 this reads"):
        read_bytes(path, "the workload", ConfigError, "", limit=10)


def test_fields_name_the_path_of_a_missing_key_or_a_wrong_type() -> None:
    fields = Fields({"bin": "x", "bolt": {"binary": 3}, "n": True, "xs": ["a", 1]}, "m.json", WorkDirError, "redo")
    assert fields.string("bin") == "x"
    assert fields.opt_string("nope") is None
    with pytest.raises(WorkDirError) as caught:
        fields.object("bolt").string("binary")
    assert caught.value.line() == "m.json: bolt: 'binary' is the number 3, not a string (redo)"
    with pytest.raises(WorkDirError, match=r"m\.json: 'sha256' is missing"):
        fields.string("sha256")
    with pytest.raises(WorkDirError, match="'n' is a boolean, not an integer"):
        fields.integer("n")
    with pytest.raises(WorkDirError, match="'xs' holds the number 1, not only strings"):
        fields.strings("xs")
    with pytest.raises(WorkDirError, match=r"m\.json: 'bin' is the string 'x', not an object"):
        fields.object("bin")
    with pytest.raises(WorkDirError, match=r"m\.json is a list, not an object"):
        Fields([], "m.json", WorkDirError, "redo")


def test_a_null_in_a_list_of_strings_is_refused_as_one() -> None:
    """Found when Fields and Table became one reader: a null among a manifest's strings was taken as a string."""
    fields = Fields({"features": ["tls", None]}, "m.json", WorkDirError, "redo")
    with pytest.raises(WorkDirError, match=r"m\.json: 'features' holds null, not only strings"):
        fields.strings("features")
    table = Table("w.toml [workload]", {"features": ["tls", None]})
    with pytest.raises(ConfigError, match=r"w\.toml \[workload\]: features: expected a list of strings"):
        table.strings("features")


def _garbage(rng: random.Random) -> bytes:
    """Random bytes, truncated JSON or TOML, or valid documents of the wrong shape."""
    doc = {"schema": 1, "optimise": {"ok": True, "binary": "/x", "n": [1, {"a": None}]}}
    text = json.dumps(doc)
    choices = [
        rng.randbytes(rng.randrange(0, 200)),
        text[: rng.randrange(len(text))].encode(),
        json.dumps(rng.choice([[], 1, "s", None, True, {"optimise": []}, {"optimise": {"ok": "yes"}}])).encode(),
        b"[workload]\n" + rng.randbytes(rng.randrange(1, 40)),
        b"\xef\xbb\xbf" + text.encode(),  # a byte-order mark
    ]
    return rng.choice(choices)


def test_garbage_in_any_reader_is_a_pgo_error_or_a_value(tmp_path: Path) -> None:
    rng = random.Random(20261203)
    path = tmp_path / "garbage"
    for _ in range(500):
        path.write_bytes(_garbage(rng))
        for read in (read_json, read_toml):
            try:
                data = read(path, "the file", WorkDirError, "")
            except PgoError:
                continue
            with contextlib.suppress(PgoError):  # a value came back: reading its fields is one line too
                Fields(data, "the file", WorkDirError, "").object("optimise").boolean("ok")


def test_what_a_path_is_when_it_is_not_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "link").symlink_to("file")
    os.mkfifo(tmp_path / "fifo")
    assert not_a_file(tmp_path / "file") is None
    assert not_a_file(tmp_path / "link") is None  # followed, as open() does
    assert not_a_file(tmp_path) == "a directory"
    assert not_a_file(Path("/dev/null")) == "a character device"
    assert not_a_file(tmp_path / "fifo") == "a fifo"
    assert not_a_file(tmp_path / "missing") == "no such file"
    assert not_a_file(tmp_path / ("n" * 300)) == "no such file"  # ENAMETOOLONG
