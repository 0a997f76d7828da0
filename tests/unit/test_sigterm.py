"""The exit_on_sigterm shim (recipes/train/sigterm.py): built with the system's C compiler, refused without one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from recipes.errors import ToolchainError
from recipes.train import sigterm


@pytest.mark.refuses("exit-sigterm-no-c-compiler-for-shim")
def test_no_c_compiler_for_the_shim_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match=r"exit_on_sigterm needs a C compiler \(cc\) .*apt-get install -y gcc, or"):
        sigterm.shim(tmp_path / "shim", {"PATH": str(tmp_path)})
    assert not (tmp_path / "shim").exists()


def test_the_shim_is_built_with_cc(tmp_path: Path) -> None:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    library = sigterm.shim(tmp_path / "shim", {"PATH": "/usr/bin:/bin"})
    assert library.is_file() and library.suffix == ".so"
