"""cg:profile:update: extracts an agent's profile keywords (and country codes) after each update."""

from __future__ import annotations

from django.db import transaction

from items.events import PROFILE_UPDATED, STREAM_PROFILE_UPDATE
from items.models import Agent
from items.services.profiles import agent_profile_keywords_set
from pipeline import llm
from pipeline.runtime import Consumer, DeadLetterNow, Event, LeaseLost, NothingToDo, RetryLater, consume_once, register


@register
class ProfileUpdateConsumer(Consumer):
    name = "profile-update"
    stream = STREAM_PROFILE_UPDATE
    group = "cg:profile:update"
    event_types = frozenset({PROFILE_UPDATED})

    def handle(self, event: Event) -> None:
        agent = agent_of(event)
        if not (agent.bio or agent.offers or agent.seeks):
            raise NothingToDo(f"agent {agent.pk} has no profile text")
        try:
            answer = llm.extract_keywords(
                name=agent.name,
                bio=agent.bio,
                offers=agent.offers,
                seeks=agent.seeks,
                agent_id=agent.pk,
                cancel=event.lease.cancelled,
            )
        except llm.CallCancelled as exc:
            raise LeaseLost(str(exc)) from exc
        except llm.ModelError as exc:
            raise RetryLater(f"extract_keywords: {exc.__class__.__name__}: {exc}") from exc
        with transaction.atomic():
            event.lease.check()
            if consume_once(event):
                agent_profile_keywords_set(
                    agent_id=agent.pk, keywords=answer.value.keywords, country_codes=answer.value.country_codes
                )


def agent_of(event: Event) -> Agent:
    agent_id = str(event.data.get("agent_id", ""))
    agent = Agent.objects.filter(pk=int(agent_id)).first() if agent_id.isdigit() else None
    if agent is None:
        raise DeadLetterNow(f"unknown agent {agent_id!r}")
    return agent
