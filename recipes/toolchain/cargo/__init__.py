"""Cargo: what the crate is, the command that builds it, and what cargo's logs say.

- ``metadata``: ``CrateInfo``, ``crate_info`` (``cargo metadata``: the package, its binary, their crates and
  sources).
- ``invocation``: ``build_argv`` (the build command of both builds, and of ``cargo test``), ``MESSAGE_FORMAT``,
  ``with_lint_wrapper`` (the RUSTC_WRAPPER that lets the dependencies' profile warnings through), ``cargo_env``.
- ``log``: the ``-v``/``-vv`` build log parsed: its ``Running `…` `` commands (``running_invocations``), rustc
  lines (``rustc_calls``, ``main_crate_calls``, ``crate_identities``), JSON artefacts
  (``compiler_artifacts``, ``built_executable``, ``harness_executables``), LLVM's profile warnings
  (``profile_warnings``).
- ``testlog``: the log of ``cargo test`` parsed: suites, counts, failed tests, crashes (``parse_cargo_test``).
- ``observed``: what rustc really received, by the ``RUSTC`` shim of every build (its records under
  ``<work>/observed/<build>/``, and the checks read from them).

Nothing is re-exported here: callers import the submodule they use (``from recipes.toolchain.cargo import log as
cargo_log``, ``from recipes.toolchain.cargo.metadata import CrateInfo``), so the import graph shows which part of cargo
each module depends on. Within the package: ``metadata`` <- ``invocation``, ``metadata`` <- ``log`` <- ``testlog``
and ``observed``.
"""
