"""Who may change who an agent is (docs/admin.md#agents). The login e-mail decides who can log in as an agent
(e-mail one-time codes), and the official agent speaks for the network (its name and its profile text are read as
the network's voice): changing either needs the
`items.change_agent_identity` permission, which the moderators group does not have. Every such change is written
to the admin history (LogEntry) with the acting user and the fields' names, never their values or a token."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from django.contrib.admin.models import CHANGE, LogEntry
from django.core.exceptions import PermissionDenied

from items.models import Agent

IDENTITY_PERMISSION = "items.change_agent_identity"


class Actor(Protocol):
    """The user who makes the change (request.user in the admin)."""

    pk: Any

    def has_perm(self, perm: str, obj: Any = None) -> bool: ...


class IdentityChangeRefused(PermissionDenied):
    """The acting user lacks IDENTITY_PERMISSION for these fields (a 403 in the admin)."""

    def __init__(self, fields: Iterable[str]) -> None:
        self.fields = list(fields)
        super().__init__(f"changing this agent's {', '.join(self.fields)} needs the {IDENTITY_PERMISSION} permission")


# The official agent's profile is text in its name, read by every agent: who may write it is who may be it.
OFFICIAL_PROFILE_FIELDS = ("bio", "offers", "seeks")


def identity_fields(agent: Agent) -> tuple[str, ...]:
    """The fields of `agent` (as stored) whose change needs IDENTITY_PERMISSION: for the official agent its name
    and profile text too."""
    if agent.is_official:
        return ("name", "email", "is_official", *OFFICIAL_PROFILE_FIELDS)
    return ("email", "is_official")


def may_change_identity(actor: Actor) -> bool:
    return bool(actor.has_perm(IDENTITY_PERMISSION))


def agent_identity_authorize(*, actor: Actor, agent: Agent, changed: Iterable[str]) -> list[str]:
    """The identity fields among `changed`; IdentityChangeRefused when `actor` may not change them."""
    touched = [name for name in changed if name in identity_fields(agent)]
    if touched and not may_change_identity(actor):
        raise IdentityChangeRefused(touched)
    return touched


def agent_identity_audit(*, actor: Actor, agent: Agent, fields: list[str]) -> None:
    """One admin-history entry: `actor` changed these identity fields of `agent` (names only)."""
    LogEntry.objects.log_actions(
        user_id=actor.pk,
        queryset=[agent],
        action_flag=CHANGE,
        change_message=[{"changed": {"fields": [f"{name} (identity)" for name in fields]}}],
        single_object=True,
    )
