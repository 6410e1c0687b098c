"""Strict extraction of the one JSON object in a model's reply (docs/model-layer.md#parsing-the-reply): tolerate prose
and code fences around it, refuse anything ambiguous (no object, truncated object, several different objects). Never
guess."""

from __future__ import annotations

import json
import re
from typing import Any

# A "{" that starts what looks like a JSON object (a key's quote or an empty object) must decode; if it does
# not, the reply holds a broken candidate (usually truncated) and the whole reply is refused.
_LOOKS_LIKE_OBJECT = re.compile(r"\{\s*(?:[\"'}]|$)")


class JSONExtractionError(ValueError):
    """The text does not hold exactly one well-formed JSON object."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys, parse_constant=_reject_constant)


def extract_json_object(text: str) -> dict[str, Any]:
    """Return the single JSON object in `text`; raise JSONExtractionError otherwise.

    Objects nested in other objects or in arrays are part of their container, not candidates. The same
    object repeated verbatim counts once; two different objects, or one valid object next to a broken one,
    are an error.
    """
    if not isinstance(text, str) or not text.strip():
        raise JSONExtractionError("empty reply")
    candidates: list[dict[str, Any]] = []
    broken: list[int] = []
    pos = 0
    length = len(text)
    while pos < length:
        char = text[pos]
        if char not in "{[":
            pos += 1
            continue
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except ValueError:
            if char == "{" and _LOOKS_LIKE_OBJECT.match(text, pos):
                broken.append(pos)
            pos += 1
            continue
        if isinstance(value, dict):
            candidates.append(value)
        pos = end  # whatever was inside the decoded value is not a separate candidate
    distinct: list[dict[str, Any]] = []
    for candidate in candidates:
        if candidate not in distinct:
            distinct.append(candidate)
    if len(distinct) > 1:
        raise JSONExtractionError(f"{len(distinct)} different JSON objects in the reply")
    if broken:
        where = "after a complete object" if distinct else "and no complete object"
        raise JSONExtractionError(f"malformed or truncated JSON object at offset {broken[0]} {where}")
    if not distinct:
        raise JSONExtractionError("no JSON object in the reply")
    return distinct[0]
