"""The last WebSocket route: an unknown path is refused with 404 and the JSON error body, not a 500.

The refusal uses ASGI's WebSocket denial-response extension (uvicorn offers it), so the client sees an HTTP
404 answer to its handshake; under a server without the extension the handshake is refused plainly (403)."""

from __future__ import annotations

import json

from items.api.errors import error_body

DENIAL_EXTENSION = "websocket.http.response"


async def websocket_not_found(scope, receive, send) -> None:
    message = await receive()
    if message["type"] != "websocket.connect":
        return
    body = json.dumps(error_body("not_found", f"no WebSocket endpoint at {scope.get('path', '')[:200]}")).encode()
    if DENIAL_EXTENSION in scope.get("extensions", {}):
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "websocket.http.response.start", "status": 404, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": 1008})
