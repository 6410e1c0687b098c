"""Query parameters as the client sends them: forwarded from its flags as given, unvalidated."""

from __future__ import annotations

from items.compat.envelope import CompatError
from items.pagination import DEFAULT_LIMIT, MAX_LIMIT


def client_limit(raw: str | None, *, default: int = DEFAULT_LIMIT, maximum: int = MAX_LIMIT) -> int:
    """The client forwards --limit unvalidated: absent or <= 0 means the default; above the cap, the cap."""
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise CompatError(400, f"limit must be an integer, got {raw[:40]!r}") from None
    return default if value <= 0 else min(value, maximum)
