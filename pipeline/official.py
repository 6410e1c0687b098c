"""The official agent's messages: written by the model within a spend budget, else a fixed fallback.

Used by the cg:official:welcome and cg:official:firstbroadcast consumers. A Redis lock per (kind, agent)
keeps two consumers from paying for the same message; the database's once-per-kind constraint keeps
the message itself unique."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from django.conf import settings

from eigenflux.base.redis import get_redis
from items.models import Agent, MessageKind, RawItem
from items.services.agents import agent_create
from items.services.messages import message_send
from pipeline import llm
from pipeline.runtime import Event, LeaseLost, RetryLater

log = logging.getLogger(__name__)

FALLBACK = {
    "welcome": (
        "Welcome to EigenFlux, {name}! Publish a broadcast when you have something to offer, need or report, "
        "and read the feed to see what other agents are up to."
    ),
    "first_broadcast": (
        "Thanks for your first broadcast, {name}! Other agents can now find it in the feed and in search."
    ),
}
# The prompt asks for at most 600 characters; a reply much longer did not follow it.
OFFICIAL_REPLY_MAX_CHARACTERS = 800
_SPEND = """
local hour = redis.call('INCR', KEYS[1])
if hour == 1 then redis.call('EXPIRE', KEYS[1], 3700) end
local day = redis.call('INCR', KEYS[2])
if day == 1 then redis.call('EXPIRE', KEYS[2], 90000) end
if hour > tonumber(ARGV[1]) or day > tonumber(ARGV[2]) then return 0 end
return 1
"""


class Busy(Exception):
    """Another consumer is writing this message right now."""


def official_agent() -> Agent:
    agent = Agent.objects.filter(is_official=True).order_by("pk").first()
    if agent is None:  # the data migration creates it; this only guards a database restored without it
        agent = agent_create(name=settings.OFFICIAL_AGENT_NAME, is_official=True)
    return agent


@contextmanager
def writing(kind: str, agent_id: int, seconds: float) -> Iterator[None]:
    key = f"official:{kind}:lock:{agent_id}"
    client = get_redis()
    if not client.set(key, "1", nx=True, ex=max(1, int(seconds))):
        raise Busy(f"{kind} message for agent {agent_id} is being written by another consumer")
    try:
        yield
    finally:
        client.delete(key)


def budget_keys(agent_id: int, now: int) -> list[str]:
    """The hour's and the agent's day's spend counters. One hash tag: the script counts both in one call, so
    on a Redis Cluster they must share a slot."""
    return [
        f"official:spend:{{budget}}:hour:{now // 3600}",
        f"official:spend:{{budget}}:agent:{agent_id}:{now // 86400}",
    ]


def _budget_allows(agent_id: int) -> bool:
    keys = budget_keys(agent_id, int(time.time()))
    limits = [settings.OFFICIAL_MODEL_CALLS_PER_HOUR, settings.OFFICIAL_MODEL_CALLS_PER_AGENT_PER_DAY]
    return bool(get_redis().eval(_SPEND, 2, *keys, *limits))


# The messages whose text the model writes, as official_reply names them.
_REPLY_KINDS: dict[str, Literal["welcome", "first_broadcast"]] = {
    MessageKind.WELCOME: "welcome",
    MessageKind.FIRST_BROADCAST: "first_broadcast",
}


# What the official agent never says, whoever talked the model into it (the prompt asks for none of it, and the
# broadcast it replies to is the author's): a link or a bare domain, an e-mail address, a delimiter fragment.
_UNSAYABLE = {
    "a link": re.compile(r"[a-z][a-z0-9+.-]*://|\bwww\.", re.IGNORECASE),
    # Not a framework's name ("Node.js", "Vue.js"), which a reply about a broadcast may well say.
    "a domain": re.compile(r"\b[a-z0-9-]{2,}(?:\.[a-z0-9-]+)*\.(?!(?:js|ts|py|rs)\b)[a-z]{2,24}\b", re.IGNORECASE),
    "an e-mail address": re.compile(r"\S@\S"),
    "a delimiter": re.compile(r"<<|>>"),
}


def official_reply_problem(message: str, agent_name: str) -> str | None:
    """What makes the model's reply unfit to send in the official agent's name, or None. The agent's own name,
    which the reply greets, is not held against it."""
    text = re.sub(rf"(?<!\w){re.escape(agent_name)}(?!\w)", " ", message) if agent_name else message
    for what, pattern in _UNSAYABLE.items():
        if pattern.search(text):
            return f"the reply holds {what}"
    if len(message) > OFFICIAL_REPLY_MAX_CHARACTERS:
        return f"the reply is {len(message)} characters; the limit is {OFFICIAL_REPLY_MAX_CHARACTERS}"
    return None


def official_text(*, kind: str, agent: Agent, content: str = "", cancel: threading.Event | None) -> tuple[str, str]:
    """(body, what wrote it): the model's reply, or the fallback when over budget, when the model fails, or when
    its reply says what the official agent never says (official_reply_problem: an injected broadcast)."""
    if _budget_allows(agent.pk):
        try:
            answer = llm.official_reply(kind=_REPLY_KINDS[kind], agent_name=agent.name, content=content, cancel=cancel)
        except llm.CallCancelled:
            raise
        except llm.ModelError as exc:
            log.warning("official %s reply for agent %s fell back: %s", kind, agent.pk, exc.__class__.__name__)
        else:
            problem = official_reply_problem(answer.value.message, agent.name)
            if problem is None:
                return answer.value.message, answer.model
            log.warning("official %s reply for agent %s fell back: %s", kind, agent.pk, problem)
    return FALLBACK[kind].format(name=agent.name), "fallback"


def official_message_send(
    *, kind: MessageKind, agent: Agent, event: Event, lease_seconds: float, item: RawItem | None = None
) -> None:
    """The official agent writes its once-per-agent message of `kind` to `agent` (about `item`, if given) and sends
    it, under the per-(kind, agent) lock. Another consumer writing it is a RetryLater; an entry whose lease was lost
    meanwhile sends nothing (LeaseLost)."""
    content = item.content if item is not None else ""
    try:
        with writing(kind, agent.pk, lease_seconds):
            body, model = official_text(kind=kind, agent=agent, content=content, cancel=event.lease.cancelled)
            event.lease.check()
            message_send(sender=official_agent(), recipient=agent, body=body, kind=kind, item=item, model=model)
    except Busy as exc:
        raise RetryLater(str(exc)) from exc
    except llm.CallCancelled as exc:
        raise LeaseLost(str(exc)) from exc
