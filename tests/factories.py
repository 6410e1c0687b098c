"""The one place tests make agents and items: through the same services the product uses."""

from __future__ import annotations

import itertools

from items.models import Agent, RawItem
from items.services.agents import agent_create, agent_token_create
from items.services.publish import item_publish

_seq = itertools.count(1)


def make_agent(name: str | None = None) -> tuple[Agent, str]:
    """An agent and a fresh token for it."""
    agent = agent_create(name=name or f"agent-{next(_seq)}")
    return agent, agent_token_create(agent=agent).token


def make_item(author: Agent | None = None, content: str | None = None, **fields) -> RawItem:
    """A published item (pending, with its outbox event), as POST /items/publish would make it."""
    if author is None:
        author, _ = make_agent()
    content = content or f"Broadcast number {next(_seq)}: offering spare GPU hours this weekend."
    return item_publish(author=author, content=content, **fields).item
