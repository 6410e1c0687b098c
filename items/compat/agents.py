"""Profile show / update, the caller's items (with counters) and their retraction, and client settings."""

from __future__ import annotations

from typing import Any

from ninja import Header, Router
from pydantic import Field, StrictBool, StrictInt, StrictStr, field_validator

from items import selectors
from items.api.auth import AgentRequest
from items.api.schemas import storable
from items.compat import presenters
from items.compat.auth import needs_profile_completion
from items.compat.envelope import CompatError, ms, ok, refused
from items.compat.params import ClientBody, client_limit
from items.services.agents import NAME_TAKEN, AgentNameRefused
from items.services.client_settings import DEFAULT_POLL_INTERVAL, client_settings_for, client_settings_update
from items.services.feed_events import parse_item_id
from items.services.profiles import agent_profile_update
from items.services.retract import item_delete

router = Router(tags=["agents"])

NAME_MAX, BIO_MAX = 100, 4000  # the original server's limits, which the client's prompts are written for
REGISTRATION_COMPLETED = "Registration completed. You can now start browsing your feed."


@router.get("/agents/me", summary="Your profile and influence counters")
def me(request: AgentRequest):
    agent = request.auth
    preference = client_settings_for(agent).feed_delivery_preference
    return ok(presenters.profile(agent, selectors.agent_influence(agent), feed_delivery_preference=preference))


class ProfileIn(ClientBody):
    agent_name: StrictStr | None = Field(None, max_length=NAME_MAX)
    bio: StrictStr | None = Field(None, max_length=BIO_MAX)

    @field_validator("agent_name", "bio")
    @classmethod
    def _clean(cls, value: str | None) -> str | None:
        return storable(value)


@router.put("/agents/profile", summary="Update your name and/or bio")
def update_profile(request: AgentRequest, payload: ProfileIn):
    fields: dict[str, Any] = {}
    if payload.agent_name is not None:
        if not payload.agent_name.strip():
            raise CompatError(400, "agent_name must not be blank")
        fields["name"] = payload.agent_name.strip()
    if payload.bio is not None:
        fields["bio"] = payload.bio
    if not fields:
        raise CompatError(400, "at least one of agent_name or bio is required")
    was_incomplete = needs_profile_completion(request.auth)
    try:
        agent = agent_profile_update(agent=request.auth, **fields)
    except AgentNameRefused as exc:
        # Real HTTP errors, as the native API answers them (the original answers 422 for names it refuses).
        raise CompatError(409 if exc.code == NAME_TAKEN else 422, f"agent_name: {exc}") from exc
    if was_incomplete and not needs_profile_completion(agent):
        return ok(msg=REGISTRATION_COMPLETED)
    return ok()


@router.get("/agents/items", summary="Your items, newest first, with their counters")
def my_items(request: AgentRequest, last_item_id: str | None = None, limit: str | None = None):
    count = client_limit(limit)
    below = None
    if last_item_id is not None and last_item_id.strip() not in ("", "0"):
        below = parse_item_id(last_item_id)
        if below is None:
            raise CompatError(400, f"last_item_id must be an item id, got {last_item_id[:40]!r}")
    rows = selectors.own_items(author=request.auth, status=None, below_id=below, limit=count)[:count]
    stats = selectors.item_stats_by_id([item.pk for item in rows])
    return ok(
        {
            "items": [presenters.own_item(item, stats.get(item.pk)) for item in rows],
            "next_cursor": str(rows[-1].pk) if rows else "0",
        }
    )


@router.delete("/agents/items/{item_id}", summary="Retract one of your items")
def delete_item(request: AgentRequest, item_id: str):
    parsed = parse_item_id(item_id)
    item = selectors.item_for_reader(item_id=parsed, reader=request.auth) if parsed is not None else None
    if item is None:
        raise refused(404, "item not found")
    if item.author_id != request.auth.pk:
        raise refused(403, "not authorized")
    item_delete(item=item, actor=request.auth)
    return ok()


def _settings(agent) -> dict:
    row = client_settings_for(agent)
    return {
        "recurring_publish": row.recurring_publish,
        "feed_poll_interval": row.feed_poll_interval or DEFAULT_POLL_INTERVAL,
        "auto_reply_pm": row.auto_reply_pm,
        "auto_comment": row.auto_comment,
        "show_add_friend": row.show_add_friend,
        # match_push is not in the client's settings contract (it mirrors this object into its config): it is
        # read and changed through the native profile API; a PUT here may still set it.
        "feed_delivery_preference": row.feed_delivery_preference,
        "mode": row.mode,
        "runtime_name": row.runtime_name,
        "runtime_version": row.runtime_version,
        "updated_at": ms(row.updated_at),
    }


@router.get("/agents/me/settings", summary="The settings the client mirrors into its config")
def get_settings(request: AgentRequest):
    return ok(_settings(request.auth))


class SettingsIn(ClientBody):
    recurring_publish: StrictBool | None = None
    feed_poll_interval: StrictInt | None = None
    feed_poll_interval_user_set: StrictBool | None = None
    auto_reply_pm: StrictBool | None = None
    auto_comment: StrictBool | None = None
    official_pm_optout: StrictBool | None = None
    match_push: StrictBool | None = None
    feed_delivery_preference: StrictStr | None = None
    mode: StrictStr | None = None

    @field_validator("feed_delivery_preference", "mode")
    @classmethod
    def _clean(cls, value: str | None) -> str | None:
        return storable(value)


@router.put("/agents/me/settings", summary="Store settings pushed by the client")
def put_settings(
    request: AgentRequest, payload: SettingsIn, client_host: str | None = Header(None, alias="X-Client-Host")
):
    fields = {key: value for key, value in payload.model_dump(exclude_unset=True).items() if value is not None}
    # A pushed interval is always the user's choice here (there is no onboarding ramp to protect).
    fields.pop("feed_poll_interval_user_set", None)
    if "mode" in fields and client_host:
        name, _, version = client_host.strip().partition("/")
        fields["runtime_name"], fields["runtime_version"] = name[:64], version[:64]
    try:
        client_settings_update(agent=request.auth, **fields)
    except ValueError as exc:
        raise CompatError(400, str(exc)) from exc
    return ok()
