"""Per-run TLS certificates for the training (openssl): ECDSA P-256 and RSA, self-signed for 127.0.0.1."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from recipes.runner import run

#: the key types the training can generate, and openssl's -newkey arguments for each
KEY_TYPES: dict[str, list[str]] = {
    "ecdsa": ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"],
    "rsa": ["-newkey", "rsa:2048"],
}


def cert_argv(kind: str, cert: Path, key: Path) -> list[str]:
    return [
        "openssl",
        "req",
        "-x509",
        *KEY_TYPES[kind],
        "-nodes",
        "-days",
        "7",
        "-subj",
        "/CN=localhost",
        "-addext",
        "subjectAltName=DNS:localhost,IP:127.0.0.1",
        "-keyout",
        str(key),
        "-out",
        str(cert),
    ]


def make_certs(kinds: list[str], directory: Path, *, env: Mapping[str, str], logs: Path) -> dict[str, str]:
    """A certificate and key per kind in ``directory``; returns the placeholders ``{<kind>_cert}`` and
    ``{<kind>_key}``."""
    directory.mkdir(parents=True, exist_ok=True)
    values = {}
    for kind in kinds:
        cert, key = directory / f"{kind}-cert.pem", directory / f"{kind}-key.pem"
        run(cert_argv(kind, cert, key), env=env, log=logs / f"certs-{kind}.log", what=f"openssl ({kind} certificate)")
        os.chmod(key, 0o600)
        values[f"{kind}_cert"] = str(cert)
        values[f"{kind}_key"] = str(key)
    return values
