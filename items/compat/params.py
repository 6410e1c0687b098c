"""Query parameters as the client sends them (forwarded from its flags as given, unvalidated), and the base
of its request bodies."""

from __future__ import annotations

from typing import Any

from ninja import Schema
from pydantic import ConfigDict, ModelWrapValidatorHandler, model_validator

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


class ClientBody(Schema):
    """A request body of the client API: a JSON object whose unknown fields are ignored (as the original's
    binding does). Anything but an object is refused: without this, ninja reads fields off a list or a number
    as if they were all absent, and a body of only optional fields would be a silent success."""

    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="wrap")
    @classmethod
    def _json_object(cls, data: Any, handler: ModelWrapValidatorHandler) -> Any:
        # A wrap validator of the subclass runs outside ninja's own, so `data` is still the parsed JSON here.
        if not isinstance(data, dict):
            raise ValueError("must be a JSON object")
        return handler(data)
