"""`nox -s bench`: what a profile is worth, the builds side by side in rotated rounds, by one of two measures under
one harness (:mod:`.harness`): CPU time per request or run (:mod:`.timing`), or valgrind's exact counts
(:mod:`.counting`). One writer of results.json and results.md (:mod:`.cpu_report`, each measure's words a ``Page``;
the counts' in :mod:`.counts_report`); the training's coverage of the bench (:mod:`.coverage`); what results.json
says besides its scenarios, typed (:mod:`.meta`)."""
