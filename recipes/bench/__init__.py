"""`nox -s bench`: what a profile is worth, as CPU time per request (or run), the builds in rotated rounds."""
