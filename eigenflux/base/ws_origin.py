"""Same-origin WebSockets: a cookie-authenticated socket opens only from a page of this very server.

Browsers send a session cookie with a WebSocket opened by any page, so the Origin header is the only thing that
tells our own admin page from another site's (cross-site WebSocket hijacking). An origin is a scheme, a host and
a port: `http://localhost:9999` is another site than `http://localhost:8000`, and `http://` than `https://`. The
socket's Origin must equal the server's own origin as the request addresses it (the Host header, which must be
in ALLOWED_HOSTS, and the scheme: `wss`, or a SECURE_PROXY_SSL_HEADER saying so, is https), or be listed in
CSRF_TRUSTED_ORIGINS (a site served under another name, as Django's CSRF check allows it).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(scheme: str, host: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of `scheme://host`, the port made explicit; None when it is not an http(s) origin."""
    try:
        parts = urlsplit(f"{scheme}://{host}")
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return parts.scheme, parts.hostname, port or _DEFAULT_PORTS[parts.scheme]


def _header(scope: dict, name: bytes) -> str:
    for key, value in scope.get("headers") or ():
        if key == name:
            return value.decode("latin-1").strip()
    return ""


def _secure(scope: dict) -> bool:
    if scope.get("scheme") == "wss":
        return True
    proxy_header = settings.SECURE_PROXY_SSL_HEADER
    if not proxy_header:
        return False
    name, secure_value = proxy_header
    header = name.removeprefix("HTTP_").lower().replace("_", "-").encode("latin-1")
    return _header(scope, header).split(",")[0].strip() == secure_value


def origin_allowed(scope: dict) -> bool:
    """Whether the socket's Origin is this server's own (scheme, host and port) or a CSRF_TRUSTED_ORIGINS one."""
    raw = _header(scope, b"origin")
    if "://" not in raw:
        return False
    scheme, _, host = raw.partition("://")
    offered = _origin(scheme.lower(), host)
    if offered is None:
        return False
    trusted = {_origin(*entry.split("://", 1)) for entry in settings.CSRF_TRUSTED_ORIGINS if "://" in entry}
    if offered in trusted:
        return True
    own_host = _header(scope, b"host")
    domain, _port = split_domain_port(own_host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return False
    return offered == _origin("https" if _secure(scope) else "http", own_host)


class SameOriginOnly:
    """ASGI middleware: a WebSocket whose Origin is not allowed (origin_allowed) is refused before the
    consumer (and the session lookup) runs."""

    def __init__(self, application) -> None:
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not origin_allowed(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
