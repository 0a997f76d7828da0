"""`nox -s bench`: what a profile is worth, as CPU time per request of the server, two builds interleaved."""
