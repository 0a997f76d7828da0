"""The release wing: ``nox -s release`` (:mod:`.make`, the matrix of targets in :mod:`.matrix`), what a release
holds and proves (:mod:`.manifest`, :mod:`.provenance`, :mod:`.reproducible`), the checks and rebuilds of it
(:mod:`.rebuild`, :mod:`.diff`, the baseline-CPU check :mod:`.cpu`), its container image (:mod:`.image`) and the
release sessions' arguments (:mod:`.args`). Nothing is re-exported: callers import the module they use."""
