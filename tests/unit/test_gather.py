"""The posargs of ``train -- --shard`` and ``merge -- --gather`` (recipes/stages/gather.py), the build ids of
``llvm-profdata show --binary-ids`` (a real capture of a raw profile of hello) and the GNU build id of an ELF
binary (gcc-linked here, readelf as the witness)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from recipes.errors import ConfigError
from recipes.llvm import elf, profdata
from recipes.release.reproducible.tags import take_gather
from recipes.stages.gather import take_shard

DATA = Path(__file__).parent.parent / "data"


def test_shard_is_taken_from_the_posargs() -> None:
    assert take_shard([]) == (None, [])
    assert take_shard(["--shard", "main", "--min-functions", "3"]) == ("main", ["--min-functions", "3"])
    assert take_shard(["--train-scale", "2", "--shard=breadth"]) == ("breadth", ["--train-scale", "2"])


@pytest.mark.refuses("gather-posargs")
@pytest.mark.parametrize(
    ("posargs", "words"),
    [
        (["--shard"], "--shard needs a shard's name"),
        (["--shard", "--min-functions", "3"], "--shard needs a shard's name"),
        (["--shard="], "--shard needs a shard's name"),
        (["--shard", "main", "--shard", "breadth"], "--shard is given 2 times (main, breadth): a leg trains one shard"),
    ],
)
def test_shard_posargs_refused(posargs: list[str], words: str) -> None:
    with pytest.raises(ConfigError) as refused:
        take_shard(posargs)
    assert words in refused.value.line()


def test_gather_takes_the_folders_up_to_the_next_option() -> None:
    assert take_gather(["--min-functions", "3"]) == (None, ["--min-functions", "3"])
    assert take_gather(["--gather", "a", "b/c", "--train-scale", "2"]) == (["a", "b/c"], ["--train-scale", "2"])


@pytest.mark.refuses("gather-posargs")
@pytest.mark.parametrize(
    ("posargs", "words"),
    [
        (["--gather"], "--gather needs at least one folder"),
        (["--gather", "--train-scale", "2"], "--gather needs at least one folder"),
        (["--gather", "a", "--train-scale", "2", "--gather", "b"], "--gather is given twice"),
    ],
)
def test_gather_posargs_refused(posargs: list[str], words: str) -> None:
    with pytest.raises(ConfigError) as refused:
        take_gather(posargs)
    assert words in refused.value.line()


def test_binary_ids_of_a_real_raw_profile() -> None:
    text = (DATA / "profdata-show-binary-ids.txt").read_text()
    [build_id] = profdata.parse_binary_ids(text)
    assert re.fullmatch(r"[0-9a-f]{40}", build_id)
    assert profdata.parse_binary_ids(text.split("Binary IDs:")[0]) == []


@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("readelf") is None, reason="needs gcc and readelf")
def test_build_id_of_an_elf_binary(tmp_path: Path) -> None:
    source = tmp_path / "main.c"
    source.write_text("int main(void) { return 0; }\n")
    with_id, without = tmp_path / "with", tmp_path / "without"
    subprocess.run(["gcc", "-Wl,--build-id=sha1", "-o", str(with_id), str(source)], check=True)
    subprocess.run(["gcc", "-Wl,--build-id=none", "-o", str(without), str(source)], check=True)
    notes = subprocess.run(["readelf", "-n", str(with_id)], capture_output=True, text=True, check=True).stdout
    witness = re.search(r"Build ID: ([0-9a-f]+)", notes)
    assert witness is not None
    assert elf.build_id(with_id) == witness.group(1)
    assert elf.build_id(without) is None
