"""Agents and their API tokens. Names are unique after normalisation and look-alike folding (items.names) and
the official agent's name and its look-alikes are reserved; every write of a name goes through here, which keeps
`name_key` and `name_shape_key` in step. Every write of a login e-mail goes through here too, which stores it in
its canonical form (items.email_address)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from items.email_address import email_canonical
from items.events_socket import agent_deactivated_announce, token_revoked_announce
from items.models import Agent, AgentToken
from items.names import NameKeys, is_official_name, looks_reserved, name_glyph_problem, name_keys, name_problem
from items.services.agent_identity import Actor, agent_identity_audit, agent_identity_authorize
from items.tokens import VISIBLE_PREFIX_LENGTH, token_generate, token_hash

NAME_TAKEN = "name_taken"
NAME_RESERVED = "name_reserved"
NAME_INVALID = "invalid"
_UNIQUE_CONSTRAINTS = ("agent_name_key_unique", "agent_name_shape_key_unique")


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


def agent_name_check(*, name: str, is_official: bool, agent: Agent | None = None) -> tuple[str, NameKeys]:
    """The stripped name and its keys, or AgentNameRefused saying why the name cannot be used: it cannot be
    stored, it looks like the official name (unless `is_official`), another agent's name reads or looks the
    same, or it uses characters names may not use (in this order: the first reason is the clearest)."""
    name = name.strip()
    problem = name_problem(name)
    if problem:
        raise AgentNameRefused(NAME_INVALID, problem)
    keys = name_keys(name)
    if not is_official and looks_reserved(keys):
        raise AgentNameRefused(NAME_RESERVED, _reserved_message(name))
    clash = Agent.objects.filter(Q(name_key=keys.read) | Q(name_shape_key=keys.shape))
    if agent is not None and agent.pk is not None:
        clash = clash.exclude(pk=agent.pk)
    holder = clash.values_list("name", flat=True).first()
    if holder is not None:
        raise AgentNameRefused(NAME_TAKEN, _taken_message(name, holder))
    problem = name_glyph_problem(name)
    if problem:
        raise AgentNameRefused(NAME_INVALID, problem)
    return name, keys


def _reserved_message(name: str) -> str:
    if is_official_name(name):
        return f"the name {name!r} is reserved for the official agent"
    return f"the name {name!r} looks like the reserved name {settings.OFFICIAL_AGENT_NAME!r}"


def _taken_message(name: str, holder: str) -> str:
    if holder == name:
        return f"the name {name!r} is already taken"
    return (
        f"the name {name!r} is already taken (as {holder!r}: names ignore case, width, invisible characters"
        " and look-alike letters)"
    )


@contextmanager
def _saving_name(name: str) -> Iterator[None]:
    """A savepoint that turns a lost race on a unique name index into AgentNameRefused."""
    try:
        with transaction.atomic():
            yield
    except IntegrityError as exc:
        if any(constraint in str(exc) for constraint in _UNIQUE_CONSTRAINTS):
            raise AgentNameRefused(NAME_TAKEN, f"the name {name!r} is already taken") from exc
        raise


def agent_email(email: object) -> str | None:
    """The canonical form of a login e-mail (None for none), or EmailAddressInvalid saying what is wrong."""
    return email_canonical(email) if email else None


def agent_create(*, name: str, bio: str = "", is_official: bool = False, email: str | None = None) -> Agent:
    name, keys = agent_name_check(name=name, is_official=is_official)
    email = agent_email(email)
    with _saving_name(name):
        return Agent.objects.create(
            name=name,
            name_key=keys.read,
            name_shape_key=keys.shape,
            bio=bio,
            is_official=is_official,
            email=email,
        )


def agent_rename(*, agent: Agent, name: str) -> Agent:
    """Give `agent` a new name (checked as for a new agent) and save it."""
    agent.name, keys = agent_name_check(name=name, is_official=agent.is_official, agent=agent)
    agent.name_key, agent.name_shape_key = keys.read, keys.shape
    with _saving_name(agent.name):
        agent.save(update_fields=["name", "name_key", "name_shape_key", "updated_at"])
    return agent


ACCOUNT_FIELDS = ("email", "is_official", "is_active")


@transaction.atomic
def agent_account_update(*, agent: Agent, actor: Actor, **fields: object) -> list[str]:
    """`actor` (a user) changes what a moderator manages beside the profile (login email, official flag, active
    flag); returns the fields that changed. Identity fields need their permission and are written to the admin
    history (items.services.agent_identity); deactivating closes the agent's open sockets once committed.
    Profile fields go through items.services.profiles.agent_profile_update, which announces them."""
    unknown = set(fields) - set(ACCOUNT_FIELDS)
    if unknown:
        raise ValueError(f"not account fields: {sorted(unknown)}")
    if "email" in fields:
        fields["email"] = agent_email(fields["email"])
    changed = [name for name, value in fields.items() if getattr(agent, name) != value]
    identity = agent_identity_authorize(actor=actor, agent=agent, changed=changed)
    old_email = agent.email
    for name in changed:
        setattr(agent, name, fields[name])
    if changed:
        agent.save(update_fields=[*changed, "updated_at"])
    if identity:
        agent_identity_audit(actor=actor, agent=agent, fields=identity)
    if "email" in changed and old_email:
        _email_login_tokens_revoke(agent)
    if "is_active" in changed and not agent.is_active:
        _sockets_close_on_commit(agent.pk)
    return changed


EMAIL_LOGIN_LABEL = "email login"


def _email_login_tokens_revoke(agent: Agent) -> None:
    """The tokens that e-mail logins issued proved the old mailbox, not the new one: a corrected address must
    end the sessions of whoever held the wrong one (tokens an operator issued stay)."""
    for token in AgentToken.objects.filter(agent=agent, label=EMAIL_LOGIN_LABEL, revoked_at__isnull=True):
        agent_token_revoke(token=token)


def agent_deactivate(*, agent: Agent) -> bool:
    """Deactivate `agent` (its tokens stop working, its open sockets close once committed); False when it already
    was inactive. A conditional update, so of two moderators only one deactivates."""
    done = bool(Agent.objects.filter(pk=agent.pk, is_active=True).update(is_active=False, updated_at=timezone.now()))
    if done:
        agent.is_active = False
        _sockets_close_on_commit(agent.pk)
    return done


def _sockets_close_on_commit(agent_id: int) -> None:
    transaction.on_commit(lambda: agent_deactivated_announce(agent_id=agent_id))


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
