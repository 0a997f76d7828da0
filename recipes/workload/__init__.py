"""The workload: the lowest shared vocabulary of the training and the bench.

- ``registry``: the interfaces of instance modes, phase kinds and ``[setup]`` resources, and their registries
  (filled by :mod:`recipes.train`, above, when it is imported);
- ``model``: what a loaded workload is (``Workload``, ``Instance``, ``Scenario``);
- ``fields``: keys phases and scenarios read alike (``path``/``paths``, ``headers``, ``expect``, ``runs``);
- ``scenario_format``: the ``[[bench.scenario]]`` format (what the bench does with one is :mod:`recipes.bench`'s);
- ``file``: the TOML file found, loaded and checked (placeholders, files, tools, environment).

It imports nothing above it: only the modules every layer shares (errors, inputs, config, results,
h2load's parsers). ``tests/unit/test_layers.py`` keeps it so.
"""

from recipes.workload.file import (
    BUILTIN_PROFILES,
    check_environment,
    check_tools,
    load_workload,
    no_workload_file,
    workload_path,
)
from recipes.workload.model import Instance, Scenario, Workload
from recipes.workload.scenario_format import HOW_TO_ADD

__all__ = [
    "BUILTIN_PROFILES",
    "HOW_TO_ADD",
    "Instance",
    "Scenario",
    "Workload",
    "check_environment",
    "check_tools",
    "load_workload",
    "no_workload_file",
    "workload_path",
]
