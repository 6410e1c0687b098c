"""Author milestones (docs/feed-log.md#author-milestones): when an item's counter reaches a MilestoneRule's
threshold, its author gets one message, exactly once per (item, kind, threshold).

Exactly once because everything happens in the cg:item:stats consumer's transaction, with the counter change,
its consumed-event record and the item's locked stats row: the ItemMilestone (unique per item, kind and
threshold), the inbox message it holds (which the EigenFlux client receives as a notification) and the
`item.milestone` outbox event (pushed to the author's WebSockets). A consumer killed before the commit leaves
none of them; the redelivered event then does it all once."""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable

from items.events import ITEM_MILESTONE, STREAM_ITEM_EVENTS
from items.models import (
    Agent,
    ItemMilestone,
    ItemStats,
    ItemStatus,
    Message,
    MessageKind,
    MilestoneKind,
    MilestoneRule,
    ProcessedItem,
)
from items.outbox import outbox_event_create

COUNTERS = {
    MilestoneKind.CONSUMED: "consumed",
    MilestoneKind.SCORE_TWO: "score_two",
    MilestoneKind.READERS: "readers",
}
TEMPLATE_FIELDS = ("summary", "threshold", "count", "item_id")
SUMMARY_LENGTH = 80


def template_problem(template: str) -> str | None:
    """Why `template` cannot be a milestone message, or None: only the fields of TEMPLATE_FIELDS, plainly
    (no attribute, index, conversion or format spec), so rendering can never fail or reach into objects."""
    if not template.strip():
        return "the message must not be blank"
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        return f"malformed template ({exc}); write a literal brace as {{{{ or }}}}"
    for _text, field, spec, conversion in parts:
        if field is None:
            continue
        if field not in TEMPLATE_FIELDS or spec or conversion:
            allowed = ", ".join(f"{{{name}}}" for name in TEMPLATE_FIELDS)
            return f"unknown placeholder {{{field}}}: use only {allowed}"
    return None


def milestone_text(*, template: str, item: ProcessedItem, threshold: int, count: int) -> str:
    summary = (item.summary or item.raw.content).strip()
    if len(summary) > SUMMARY_LENGTH:
        summary = summary[: SUMMARY_LENGTH - 1] + "…"
    return template.format(summary=summary, threshold=threshold, count=count, item_id=item.pk)


def item_milestones_reach(*, item_ids: Iterable[int], sender: Callable[[], Agent]) -> list[ItemMilestone]:
    """Record the milestones the items' counters reach now and had not reached before; returns them. Must run
    inside the stats consumer's transaction, with the items' stats rows locked (so two events of one item cannot
    both find a milestone new). `sender` gives the agent the messages come from (the official agent), asked
    only when there is one to send."""
    rules = list(MilestoneRule.objects.filter(enabled=True).order_by("kind", "threshold"))
    ids = sorted(set(item_ids))
    if not rules or not ids:
        return []
    stats = ItemStats.objects.filter(item_id__in=ids).exclude(item__status=ItemStatus.DELETED)
    stats = stats.exclude(item__author__is_official=True).select_related("item__raw", "item__author")
    reached = set(ItemMilestone.objects.filter(item_id__in=ids).values_list("item_id", "kind", "threshold"))
    created: list[ItemMilestone] = []
    from_agent: Agent | None = None
    for row in stats.order_by("item_id"):
        for rule in rules:
            count = getattr(row, COUNTERS[MilestoneKind(rule.kind)])
            if count >= rule.threshold and (row.item_id, rule.kind, rule.threshold) not in reached:
                from_agent = from_agent or sender()
                created.append(_reach(item=row.item, rule=rule, count=count, sender=from_agent))
    return created


def _reach(*, item: ProcessedItem, rule: MilestoneRule, count: int, sender: Agent) -> ItemMilestone:
    problem = template_problem(rule.message_template)
    # A template edited in the database behind the admin's validation still gives the author a message.
    template = rule.message_template if problem is None else "Your broadcast “{summary}” reached a milestone."
    body = milestone_text(template=template, item=item, threshold=rule.threshold, count=count)
    message = Message.objects.create(
        sender=sender, recipient=item.author, kind=MessageKind.MILESTONE, body=body, item_id=item.pk, model="template"
    )
    milestone = ItemMilestone.objects.create(
        item=item, kind=rule.kind, threshold=rule.threshold, rule=rule, message=message
    )
    outbox_event_create(
        stream=STREAM_ITEM_EVENTS,
        event_type=ITEM_MILESTONE,
        subject=str(item.pk),
        data={
            "item_id": str(item.pk),
            "author_id": str(item.author_id),
            "milestone_id": str(milestone.pk),
            "message_id": str(message.pk),
            "kind": rule.kind,
            "threshold": rule.threshold,
            "count": count,
        },
    )
    return milestone
