"""The stages of the pipeline, one module each; each reads what the one before it left in the work dir and
keeps its own record in report.json.

    instrument ──▶ train ──▶ merge ──▶ optimise ──▶ test (PGO_TEST=1)
                                           └──────▶ bolt (PGO_BOLT=1)

    instrument.py  the instrumented build (-Cprofile-generate)
    train.py       the workload on the instrumented binary: one .profraw per instance
    merge.py       llvm-profdata merge of those raw profiles; the floor of executed functions
    optimise.py    the build with -Cprofile-use, every check of it, verify, the checked copy
    test.py        pgo-test: the crate's test suite built with the same profile and flags
    bolt.py        llvm-bolt on the optimised binary (the tool itself: recipes/llvm/boltlib.py)
    plain.py       the plain build: the same build without a profile, in its frame, recorded as "plain" (the
                   release and the bench run it)
    pipeline.py    pgo: all of them in order, what they need refused before anything is built
    summary.py     the lines printed at the end of a session
    frame.py           what every stage shares: its frame (StageFrame: its record kept true through a failure, a full
                   disk or an interruption, its time, its checked copy and the rejection of what fails a check)

Nothing is imported here, so no name of this package is both a module and a function: a caller imports the
function of the module it needs, ``from recipes.stages.optimise import optimise``. The sessions that run one
stage are declared in one table, :data:`recipes.sessions.PLAN_STAGES`.
"""
