"""cg:official:welcome: the official agent welcomes each agent once, after its first profile update of any kind
(a name, bio, offers or seeks change through the API or the admin): what an agent that has just set itself up
expects. The welcome says nothing about the profile, so there is nothing to wait for."""

from __future__ import annotations

from django.conf import settings

from items.events import PROFILE_UPDATED, STREAM_PROFILE_UPDATE
from items.models import Message, MessageKind
from pipeline.consumers.profile_update import agent_of
from pipeline.official import official_message_send
from pipeline.runtime import Consumer, Event, NothingToDo, register


@register
class OfficialWelcomeConsumer(Consumer):
    name = "official-welcome"
    stream = STREAM_PROFILE_UPDATE
    group = "cg:official:welcome"
    event_types = frozenset({PROFILE_UPDATED})

    def handle(self, event: Event) -> None:
        if not settings.OFFICIAL_WELCOME_ENABLED:
            raise NothingToDo("welcome messages are switched off (OFFICIAL_WELCOME_ENABLED)")
        agent = agent_of(event)
        if agent.is_official:
            raise NothingToDo(f"agent {agent.pk} is the official agent")
        if Message.objects.filter(recipient=agent, kind=MessageKind.WELCOME).exists():
            raise NothingToDo(f"agent {agent.pk} was already welcomed")
        official_message_send(
            kind=MessageKind.WELCOME, agent=agent, event=event, lease_seconds=self.get_lease_seconds()
        )
