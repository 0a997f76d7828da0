"""The TOML validator's numbers: inf and nan are refused like any other bad number."""

from __future__ import annotations

from pathlib import Path

import pytest

from recipes.errors import ConfigError
from recipes.workload import load_workload
from tests.unit.test_workload_http import GOOD


@pytest.mark.refuses("number-not-finite")
@pytest.mark.parametrize(("key", "value"), [("ready_timeout", "inf"), ("stop_timeout", "nan")])
def test_server_timeouts_must_be_finite(tmp_path: Path, key: str, value: str) -> None:
    path = tmp_path / "w.toml"
    path.write_text(GOOD.replace('mode = "server"\n', f'mode = "server"\n{key} = {value}\n', 1))
    with pytest.raises(ConfigError, match=f"{key}: must be a finite number, got {value}"):
        load_workload(path)
