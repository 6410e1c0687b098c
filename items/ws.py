"""WS /ws/v1/events?token=…: an agent receives its own items' outcome events as they happen.

The cg:item:notify consumer sends to the agent's channel-layer group; a bad token is accepted and then
closed with code 4401 so the client can tell it from a network failure."""

from __future__ import annotations

from urllib.parse import parse_qs

from asgiref.sync import async_to_sync
from channels.generic.websocket import JsonWebsocketConsumer

from items.selectors import agent_for_token

CLOSE_UNAUTHORIZED = 4401


def agent_group(agent_id: int) -> str:
    return f"agent.{agent_id}.events"


def outcome_message(envelope: dict[str, str], data: dict) -> dict:
    return {
        "type": "item.event",
        "event": {
            "id": envelope.get("id", ""),
            "type": envelope.get("type", ""),
            "time": envelope.get("time", ""),
            "item_id": str(data.get("item_id", "")),
            "status": data.get("status", ""),
            "reason": data.get("reason", ""),
        },
    }


class AgentEventsConsumer(JsonWebsocketConsumer):
    def connect(self) -> None:
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        token = (query.get("token") or [""])[0]
        agent = agent_for_token(token) if token else None
        self.accept()
        if agent is None:
            self.send_json({"error": {"code": "unauthorized", "message": "missing, unknown or revoked token"}})
            self.close(code=CLOSE_UNAUTHORIZED)
            return
        self.group = agent_group(agent.pk)
        async_to_sync(self.channel_layer.group_add)(self.group, self.channel_name)

    def disconnect(self, code: int) -> None:
        group = getattr(self, "group", None)
        if group:
            async_to_sync(self.channel_layer.group_discard)(group, self.channel_name)

    def item_event(self, message: dict) -> None:
        self.send_json(message["event"])

    def receive_json(self, content, **kwargs) -> None:
        """The socket is push-only; anything a client sends is ignored."""
