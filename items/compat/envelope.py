"""The client's envelope: `{"code": 0, "msg": "success", "data": {...}}` on success, `{"code", "msg"}` on
failure. Business refusals are HTTP 200 with a non-zero HTTP-like `code` (as the original server answers
them); authentication, validation and not-found on reads are real HTTP errors. 401 must be a real 401:
it is the only signal that makes the client exit with status 4 ("log in again")."""

from __future__ import annotations

from datetime import UTC, datetime

from django.http import JsonResponse
from ninja.errors import HttpError

SUCCESS = "success"


def ok(data: dict | None = None, msg: str = SUCCESS) -> dict:
    """A success body; `data` is left out when there is nothing to return (as the original does)."""
    body: dict = {"code": 0, "msg": msg}
    if data is not None:
        body["data"] = data
    return body


def failure_body(code: int, msg: str) -> dict:
    return {"code": code, "msg": msg}


def failure_response(status: int, msg: str, *, code: int | None = None) -> JsonResponse:
    return JsonResponse(failure_body(status if code is None else code, msg), status=status)


class CompatError(HttpError):
    """A refusal: `status` is the HTTP status, `code` the envelope's (they differ for HTTP-200 refusals)."""

    def __init__(self, status: int, msg: str, *, code: int | None = None, retry_after: int | None = None) -> None:
        super().__init__(status, msg)
        self.code = status if code is None else code
        self.retry_after = retry_after


def refused(code: int, msg: str) -> CompatError:
    """A business refusal the original answers with HTTP 200 and a non-zero code."""
    return CompatError(200, msg, code=code)


def ms(moment: datetime | None) -> int:
    """Epoch milliseconds (0 for never)."""
    return int(moment.timestamp() * 1000) if moment is not None else 0


def iso(moment: datetime) -> str:
    """ISO 8601 in UTC with a Z, to the second (how the client's skills write expire_time)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
