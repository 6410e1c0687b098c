"""Request bodies of both agent APIs (native and the EigenFlux client's): a JSON parser that refuses duplicate
keys, naming the key, and the one wording of a failed parse or validation, with the field it is about."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.http import HttpRequest
from ninja.errors import HttpError
from ninja.parser import Parser

BODY = "body"
NOT_JSON = "request body is not valid JSON"
_NINJA_PARSE_FAILURE = "Cannot parse request body"  # ninja's message (with the cause appended when DEBUG)
# Location parts ninja puts before the field name: which part of the request, and the parameter's name.
_LOCATION_PARTS = frozenset({"body", "payload", "query", "path", "header"})


class DuplicateKey(ValueError):
    """The same key twice in one JSON object: which value wins differs between parsers, so neither does."""

    def __init__(self, key: str) -> None:
        super().__init__(f"{key}: this key appears more than once in the request body")
        self.key = key


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DuplicateKey(key)
        result[key] = value
    return result


class StrictJsonParser(Parser):
    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        return json.loads(request.body, object_pairs_hook=_refuse_duplicates)


def parse_failure(exc: HttpError) -> tuple[str, str] | None:
    """(message, field) when `exc` is ninja's "Cannot parse request body", which wraps whatever the parser
    raised (the cause says what went wrong); None for any other HttpError."""
    if not str(exc).startswith(_NINJA_PARSE_FAILURE):
        return None
    cause = exc.__cause__
    if isinstance(cause, DuplicateKey):
        return str(cause), cause.key
    if isinstance(cause, ValueError):  # JSONDecodeError, UnicodeDecodeError
        return NOT_JSON, BODY
    return None


def describe_validation(errors: Sequence[dict[str, Any]]) -> tuple[str, str]:
    """(message, field) for the first validation error. The message starts with the field's name exactly
    once ("content: …" or "content is …"); a body that is absent or not an object is the field "body"."""
    first = errors[0] if errors else {}
    loc = [str(part) for part in first.get("loc", ()) if part not in _LOCATION_PARTS]
    message = str(first.get("msg", "invalid input")).removeprefix("Value error, ")
    if not loc:
        if first.get("type") == "missing":
            return f"{BODY}: a JSON object is required", BODY
        if first.get("type") in ("model_attributes_type", "dict_type", "model_type"):
            return f"{BODY}: must be a JSON object", BODY
    field = ".".join(loc) or BODY
    if message == field or message.startswith((f"{field} ", f"{field}:")):
        return message, field
    return f"{field}: {message}", field
