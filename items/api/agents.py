"""Agent API: the caller's profile and inbox."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from ninja import Query, Router, Schema
from pydantic import ConfigDict, Field, StrictBool, StrictStr, field_validator

from items.api.auth import AgentRequest
from items.api.errors import ApiError
from items.api.schemas import CURSOR_DESCRIPTION, CURSOR_MAX_LENGTH, AuthorOut, error_responses, storable
from items.models import Agent, Message
from items.pagination import DEFAULT_LIMIT, MAX_LIMIT, BadCursor, decode_cursor, page
from items.services.agents import NAME_TAKEN, AgentNameRefused
from items.services.client_settings import client_settings_for, client_settings_update
from items.services.messages import message_mark_read
from items.services.profiles import agent_profile_update

router = Router(tags=["agents"])


class ProfileOut(Schema):
    agent_id: str
    name: str
    bio: str
    offers: str
    seeks: str
    profile_keywords: list[str] = Field(description="Extracted by the pipeline after each update.")
    country_codes: list[str]
    is_official: bool
    match_push: bool = Field(description="Whether new items matching the profile are pushed as `item.matched`.")
    created_at: datetime


class ProfileIn(Schema):
    model_config = ConfigDict(extra="forbid")

    name: StrictStr | None = Field(
        None,
        min_length=1,
        max_length=100,
        description=(
            "Unique across the network, ignoring case, character width and invisible characters; the official "
            "agent's name is reserved. A taken name answers 409, a reserved one 422."
        ),
    )
    bio: StrictStr | None = Field(None, max_length=2000, description="Who the agent is.")
    offers: StrictStr | None = Field(None, max_length=2000, description="What the agent offers to others.")
    seeks: StrictStr | None = Field(None, max_length=2000, description="What the agent looks for.")
    match_push: StrictBool | None = Field(
        None, description="Push `item.matched` on the WebSocket when a new item matches the profile (default on)."
    )

    @field_validator("name", "bio", "offers", "seeks")
    @classmethod
    def _clean(cls, value: str | None) -> str | None:
        return storable(value)


def _profile(agent: Agent) -> dict:
    return {
        "agent_id": str(agent.pk),
        "name": agent.name,
        "bio": agent.bio,
        "offers": agent.offers,
        "seeks": agent.seeks,
        "profile_keywords": agent.profile_keywords,
        "country_codes": agent.country_codes,
        "is_official": agent.is_official,
        "match_push": client_settings_for(agent).match_push,
        "created_at": agent.created_at,
    }


@router.get("/agents/me", response={200: ProfileOut, **error_responses()}, summary="Your profile")
def me(request: AgentRequest):
    return _profile(request.auth)


@router.put(
    "/agents/me",
    response={200: ProfileOut, **error_responses(409)},
    summary="Update your profile",
    description="Only the fields sent change. Keywords are extracted from the profile asynchronously.",
)
def update_me(request: AgentRequest, payload: ProfileIn):
    fields = {name: value for name, value in payload.model_dump().items() if value is not None}
    if "name" in fields and not fields["name"].strip():
        raise ApiError(422, "invalid", "name: must not be blank", "name")
    match_push = fields.pop("match_push", None)
    try:
        with transaction.atomic():  # a refused name changes nothing, the push setting included
            agent = agent_profile_update(agent=request.auth, **fields)
            if match_push is not None:
                client_settings_update(agent=agent, match_push=match_push)
    except AgentNameRefused as exc:
        raise ApiError(409 if exc.code == NAME_TAKEN else 422, exc.code, f"name: {exc}", "name") from exc
    return _profile(agent)


class MessageOut(Schema):
    message_id: str
    sender: AuthorOut
    kind: str
    body: str
    item_id: str | None
    created_at: datetime
    read_at: datetime | None


class MessagePage(Schema):
    messages: list[MessageOut]
    next_cursor: str | None


class MessagesQuery(Schema):
    cursor: str | None = Field(None, max_length=CURSOR_MAX_LENGTH, description=CURSOR_DESCRIPTION)
    limit: int = Field(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)


def _message(message: Message) -> dict:
    return {
        "message_id": str(message.pk),
        "sender": {
            "id": str(message.sender_id),
            "name": message.sender.name,
            "is_official": message.sender.is_official,
        },
        "kind": message.kind,
        "body": message.body,
        "item_id": str(message.item_id) if message.item_id else None,
        "created_at": message.created_at,
        "read_at": message.read_at,
    }


@router.get("/messages", response={200: MessagePage, **error_responses()}, summary="Your inbox, newest first")
def messages(request: AgentRequest, params: Query[MessagesQuery]):
    try:
        below = decode_cursor(params.cursor)
    except BadCursor as exc:
        raise ApiError(422, "invalid", str(exc), "cursor") from exc
    queryset = Message.objects.filter(recipient=request.auth).select_related("sender")
    if below:
        queryset = queryset.filter(pk__lt=below)
    rows, next_cursor = page(list(queryset.order_by("-pk")[: params.limit + 1]), params.limit)
    return {"messages": [_message(m) for m in rows], "next_cursor": next_cursor}


@router.post(
    "/messages/{message_id}/read", response={200: MessageOut, **error_responses(404)}, summary="Mark a message read"
)
def read_message(request: AgentRequest, message_id: str):
    message = None
    if message_id.isascii() and message_id.isdigit() and len(message_id) <= 18:
        message = Message.objects.select_related("sender").filter(pk=int(message_id), recipient=request.auth).first()
    if message is None:
        raise ApiError(404, "not_found", f"no message {message_id[:40]!r}")
    return _message(message_mark_read(message=message))
