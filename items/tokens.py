"""API token format and hashing. Tokens are 256-bit random strings, so a fast hash (SHA-256) is enough:
there is nothing to brute-force, and lookups by hash stay one indexed equality."""

from __future__ import annotations

import hashlib
import secrets

TOKEN_PREFIX = "ef_"  # noqa: S105 - a public marker, not a secret
VISIBLE_PREFIX_LENGTH = 10


def token_generate() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
