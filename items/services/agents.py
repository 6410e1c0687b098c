"""Agents and their API tokens. Names are unique after normalisation (items.names) and the official agent's
name is reserved; every write of a name goes through here, which keeps `name_key` in step. Every write of a
login e-mail goes through here too, which stores it in its canonical form (items.email_address)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone

from items.email_address import email_canonical
from items.models import Agent, AgentToken
from items.names import name_key, name_problem, reserved_key
from items.tokens import VISIBLE_PREFIX_LENGTH, token_generate, token_hash
from items.ws import token_revoked_announce

NAME_TAKEN = "name_taken"
NAME_RESERVED = "name_reserved"
NAME_INVALID = "invalid"
_UNIQUE_CONSTRAINT = "agent_name_key_unique"


class AgentNameRefused(ValueError):
    """The name cannot be used: `code` is name_taken, name_reserved or invalid."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class IssuedToken:
    """A freshly created token: `token` is the only copy of the secret and is never stored."""

    record: AgentToken
    token: str


def agent_name_check(*, name: str, is_official: bool, agent: Agent | None = None) -> tuple[str, str]:
    """The stripped name and its key, or AgentNameRefused saying why the name cannot be used."""
    name = name.strip()
    problem = name_problem(name)
    if problem:
        raise AgentNameRefused(NAME_INVALID, problem)
    key = name_key(name)
    if key == reserved_key() and not is_official:
        raise AgentNameRefused(NAME_RESERVED, f"the name {name!r} is reserved for the official agent")
    clash = Agent.objects.filter(name_key=key)
    if agent is not None and agent.pk is not None:
        clash = clash.exclude(pk=agent.pk)
    holder = clash.values_list("name", flat=True).first()
    if holder is not None:
        raise AgentNameRefused(NAME_TAKEN, _taken_message(name, holder))
    return name, key


def _taken_message(name: str, holder: str) -> str:
    if holder == name:
        return f"the name {name!r} is already taken"
    return f"the name {name!r} is already taken (as {holder!r}: names ignore case, width and invisible characters)"


@contextmanager
def _saving_name(name: str) -> Iterator[None]:
    """A savepoint that turns a lost race on the unique name index into AgentNameRefused."""
    try:
        with transaction.atomic():
            yield
    except IntegrityError as exc:
        if _UNIQUE_CONSTRAINT in str(exc):
            raise AgentNameRefused(NAME_TAKEN, f"the name {name!r} is already taken") from exc
        raise


def agent_email(email: str | None) -> str | None:
    """The canonical form of a login e-mail (None for none), or EmailAddressInvalid saying what is wrong."""
    return email_canonical(email) if email else None


def agent_create(*, name: str, bio: str = "", is_official: bool = False, email: str | None = None) -> Agent:
    name, key = agent_name_check(name=name, is_official=is_official)
    email = agent_email(email)
    with _saving_name(name):
        return Agent.objects.create(name=name, name_key=key, bio=bio, is_official=is_official, email=email)


def agent_rename(*, agent: Agent, name: str) -> Agent:
    """Give `agent` a new name (checked as for a new agent) and save it."""
    agent.name, agent.name_key = agent_name_check(name=name, is_official=agent.is_official, agent=agent)
    with _saving_name(agent.name):
        agent.save(update_fields=["name", "name_key", "updated_at"])
    return agent


ACCOUNT_FIELDS = ("email", "is_official", "is_active")


def agent_account_update(*, agent: Agent, **fields: object) -> list[str]:
    """Change what a moderator manages beside the profile (login email, official flag, active flag); returns the
    fields that changed. Profile fields go through items.services.profiles.agent_profile_update, which announces
    them."""
    unknown = set(fields) - set(ACCOUNT_FIELDS)
    if unknown:
        raise ValueError(f"not account fields: {sorted(unknown)}")
    if "email" in fields:
        fields["email"] = agent_email(fields["email"])
    changed = [name for name, value in fields.items() if getattr(agent, name) != value]
    for name in changed:
        setattr(agent, name, fields[name])
    if changed:
        agent.save(update_fields=[*changed, "updated_at"])
    return changed


def agent_token_create(*, agent: Agent, label: str = "") -> IssuedToken:
    token = token_generate()
    record = AgentToken.objects.create(
        agent=agent, prefix=token[:VISIBLE_PREFIX_LENGTH], token_hash=token_hash(token), label=label
    )
    return IssuedToken(record=record, token=token)


@transaction.atomic
def agent_create_with_token(*, name: str, label: str = "") -> IssuedToken:
    return agent_token_create(agent=agent_create(name=name), label=label)


def agent_token_revoke(*, token: AgentToken) -> bool:
    """Revoke a token; returns False if it was already revoked. Once committed, the token's open
    WebSockets are told to close."""
    revoked = bool(AgentToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now()))
    if revoked:
        agent_id, digest = token.agent_id, token.token_hash
        transaction.on_commit(lambda: token_revoked_announce(agent_id=agent_id, digest=digest))
    return revoked


def agent_token_revoke_value(*, agent: Agent, token: str) -> bool:
    """Revoke the agent's token given by its value (logout); False if it is unknown or already revoked."""
    row = AgentToken.objects.filter(agent=agent, token_hash=token_hash(token), revoked_at__isnull=True).first()
    return row is not None and agent_token_revoke(token=row)
