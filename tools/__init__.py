"""Scripts of this repository (run as python tools/<name>.py); a package only so the tests can import them."""
