"""Helpers for the client-API tests: a client for the Django test client, and one for the live server."""

from __future__ import annotations

import json

import httpx
import pytest
from django.test import Client

PREFIX = "/eigenflux/api/v1"


class CompatClient:
    """Calls the client API as the EigenFlux CLI does (JSON bodies, bearer token, client headers)."""

    def __init__(self, token: str | None = None, *, base: str = "", live: bool = False) -> None:
        self.token = token
        self.base = base
        self.live = live
        self._django = Client()

    def headers(self) -> dict[str, str]:
        headers = {"X-CLI-Ver": "0.0.33", "X-Client-Host": "terminal", "X-Client-Channel": "cli"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def call(self, method: str, path: str, body: object = None, **headers: str):
        """(status, parsed JSON body, headers)."""
        url = f"{self.base}{PREFIX}{path}"
        environ = {key: headers.pop(key) for key in list(headers) if key.isupper() and "_" in key}  # REMOTE_ADDR
        all_headers = {**self.headers(), **headers}
        data = json.dumps(body) if body is not None else None
        if self.live:
            content_headers = {"Content-Type": "application/json"} if data is not None else {}
            response = httpx.request(method, url, content=data, headers={**all_headers, **content_headers}, timeout=30)
            return response.status_code, response.json(), response.headers
        response = self._django.generic(
            method, url, data=data or "", content_type="application/json", headers=all_headers, **environ
        )
        return response.status_code, json.loads(response.content), response.headers

    def get(self, path: str, **headers: str):
        return self.call("GET", path, **headers)

    def post(self, path: str, body: object = None, **headers: str):
        return self.call("POST", path, body, **headers)

    def put(self, path: str, body: object = None, **headers: str):
        return self.call("PUT", path, body, **headers)

    def delete(self, path: str, **headers: str):
        return self.call("DELETE", path, **headers)


@pytest.fixture
def compat(db):
    """compat(token=None) -> a CompatClient through the Django test client (the full middleware stack)."""
    return lambda token=None: CompatClient(token)


@pytest.fixture
def live_compat(live_server):
    """live_compat(token=None) -> a CompatClient speaking HTTP to the running live test server."""
    return lambda token=None: CompatClient(token, base=live_server.url, live=True)
