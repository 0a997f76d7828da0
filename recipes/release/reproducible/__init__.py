"""The pieces of a build that can be made again byte for byte: path remapping, a fixed environment,
deterministic tarballs, SHA256SUMS, release tags, git queries, and where two binaries differ.

Everything here is small and pure (or a thin query of git); the sessions put it together in
recipes/release/make.py and recipes/release/rebuild.py. One module per responsibility:

- :mod:`.tags`: the release tag and the release sessions' posargs (check_tag, split_tag, take_option)
- :mod:`.environment`: the fixed environment and the path remapping (reproducible_env, remap_pairs, ...)
- :mod:`.names`: the file names of a release (Names)
- :mod:`.tarballs`: deterministic tarballs, written and read back checked (binary_tarball, release_binary, ...)
- :mod:`.oci`: OCI image layouts of binaries, byte for byte the same anywhere (image_layout, platform_of, ...)
- :mod:`.sums`: SHA256SUMS (sha256sums_text, parse_sha256sums, sum_name_problem)
- :mod:`.cargo`: cargo metadata and cargo's ``-v`` log (outside_workspace, unit_states)
- :mod:`.diffs`: where two binaries differ (binary_diff, differing_sections, ...)
- :mod:`.repo`: thin queries of git (git, repo_root, tag_commit, commit_time, dirty_paths, ...)

Every name used outside its module is re-exported here: ``from recipes.release.reproducible import X`` is the way
to import it.
"""

from recipes.release.reproducible.cargo import outside_workspace, unit_states
from recipes.release.reproducible.diffs import binary_diff, differing_bytes, differing_sections
from recipes.release.reproducible.environment import (
    cargo_home,
    remap_flags,
    remap_pairs,
    remap_roles,
    reproducible_env,
    without_remap,
)
from recipes.release.reproducible.names import Names
from recipes.release.reproducible.oci import (
    REF_NAME,
    Image,
    Layout,
    Platform,
    image_layout,
    layer_tar,
    platform_of,
    rfc3339,
)
from recipes.release.reproducible.repo import commit_time, dirty_paths, git, repo_root, tag_commit, tag_objects
from recipes.release.reproducible.sums import SUMS, parse_sha256sums, sha256sums_text, sum_name_problem
from recipes.release.reproducible.tags import check_tag, split_tag, take_option
from recipes.release.reproducible.tarballs import (
    binary_tarball,
    release_binary,
    sha256_bytes,
    tar_bytes,
    tar_member,
    tarball_bytes,
)

__all__ = [
    "REF_NAME",
    "SUMS",
    "Image",
    "Layout",
    "Names",
    "Platform",
    "binary_diff",
    "binary_tarball",
    "cargo_home",
    "check_tag",
    "commit_time",
    "differing_bytes",
    "differing_sections",
    "dirty_paths",
    "git",
    "image_layout",
    "layer_tar",
    "outside_workspace",
    "parse_sha256sums",
    "platform_of",
    "release_binary",
    "remap_flags",
    "remap_pairs",
    "remap_roles",
    "repo_root",
    "reproducible_env",
    "rfc3339",
    "sha256_bytes",
    "sha256sums_text",
    "split_tag",
    "sum_name_problem",
    "tag_commit",
    "tag_objects",
    "take_option",
    "tar_bytes",
    "tar_member",
    "tarball_bytes",
    "unit_states",
    "without_remap",
]
