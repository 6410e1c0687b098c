"""API token format and hashing. Tokens are 256-bit random strings, so a fast hash (SHA-256) is enough:
there is nothing to brute-force, and lookups by hash stay one indexed equality."""

from __future__ import annotations

import hashlib
import re
import secrets
import threading
import time
from collections import OrderedDict
from typing import TypeGuard

TOKEN_PREFIX = "ef_"  # noqa: S105 - a public marker, not a secret
VISIBLE_PREFIX_LENGTH = 10
# token_urlsafe(32): 43 characters of the URL-safe base64 alphabet.
_TOKEN_SHAPE = re.compile(r"ef_[A-Za-z0-9_\-]{43}")


def token_generate() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def token_well_formed(token: str | None) -> TypeGuard[str]:
    """Could this be one of our tokens? Anything else is refused without a database lookup."""
    return token is not None and _TOKEN_SHAPE.fullmatch(token) is not None


class UnknownTokens:
    """Hashes of well-formed tokens the database did not know, remembered for `ttl` seconds in this process
    (bounded: the oldest are forgotten first). Tokens are random and made by the server, so one unknown now
    cannot become valid later; a revoked one stays revoked."""

    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = max_entries
        self._expiry: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, digest: str) -> bool:
        with self._lock:
            expires = self._expiry.get(digest)
            if expires is None:
                return False
            if expires < time.monotonic():
                del self._expiry[digest]
                return False
            return True

    def add(self, digest: str, ttl: float) -> None:
        if ttl <= 0:
            return
        with self._lock:
            self._expiry[digest] = time.monotonic() + ttl
            self._expiry.move_to_end(digest)
            while len(self._expiry) > self.max_entries:
                self._expiry.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._expiry.clear()
