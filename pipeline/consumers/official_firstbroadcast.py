"""cg:official:firstbroadcast: the official agent answers a new agent's first broadcast, once per agent.

Its own group on stream:item:publish, so it neither waits for nor slows down enrichment."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from items.events import ITEM_PUBLISHED, STREAM_ITEM_PUBLISH
from items.models import Message, MessageKind, RawItem
from pipeline import llm
from pipeline.official import official_message_send
from pipeline.runtime import Consumer, DeadLetterNow, Event, NothingToDo, register


@register
class OfficialFirstBroadcastConsumer(Consumer):
    name = "official-firstbroadcast"
    stream = STREAM_ITEM_PUBLISH
    group = "cg:official:firstbroadcast"
    event_types = frozenset({ITEM_PUBLISHED})

    def warm_up(self) -> None:
        llm.warm_up()  # the local analyzer's models, before the first entry (pipeline.llm.local.warm)

    def handle(self, event: Event) -> None:
        if not settings.OFFICIAL_FIRST_BROADCAST_ENABLED:
            raise NothingToDo("first-broadcast replies are switched off (OFFICIAL_FIRST_BROADCAST_ENABLED)")
        item_id = str(event.data.get("item_id", ""))
        item = RawItem.objects.select_related("author").filter(pk=int(item_id)).first() if item_id.isdigit() else None
        if item is None:
            raise DeadLetterNow(f"unknown item {item_id!r}")
        author = item.author
        new_since = timezone.now() - timedelta(days=settings.OFFICIAL_NEW_AGENT_DAYS)
        if author.is_official or author.created_at < new_since:
            raise NothingToDo(f"agent {author.pk} is not a new agent")
        first_id = RawItem.objects.filter(author=author).order_by("pk").values_list("pk", flat=True).first()
        if first_id != item.pk:
            raise NothingToDo(f"item {item.pk} is not agent {author.pk}'s first broadcast")
        if Message.objects.filter(recipient=author, kind=MessageKind.FIRST_BROADCAST).exists():
            raise NothingToDo(f"agent {author.pk} already got its first-broadcast reply")
        official_message_send(
            kind=MessageKind.FIRST_BROADCAST,
            agent=author,
            event=event,
            lease_seconds=self.get_lease_seconds(),
            item=item,
        )
