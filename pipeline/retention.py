"""Retention of what grows with traffic (run by the maintenance job, pipeline.scheduled_jobs).

Each table that grows with every item, beyond the items themselves and their decisions, is pruned on its
own setting (docs/configuration.md): dispatched outbox rows, consumed-event records, model-call rows (rolled
up per hour first, so cost history and the prompts page keep their figures), audit rows (kept by default),
impression-log rows, and dead letters that were resolved or requeued. Deletes go in batches, one statement
each, so no long lock is held. Redis keys that grow are bounded where they are written (streams by MINID or
MAXLEN, the dead-letter `seen` index by age) or pruned by housekeeping (departed consumers).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from items.models import FeedImpression
from items.outbox import outbox_events_prune
from pipeline.dead_letter_table import dead_letters_resolve_not_handled, dead_letters_resolve_superseded
from pipeline.models import AuditEvent, ConsumedEvent, DeadLetter, DeadLetterState, LLMCall, LLMCallHourly

log = logging.getLogger(__name__)

BATCH = 5000


def _delete_before(model, column: str, cutoff: datetime, *, extra: str = "", params: tuple = ()) -> int:
    table = model._meta.db_table
    sql = (
        f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE {column} < %s {extra} "  # noqa: S608
        "LIMIT %s FOR UPDATE SKIP LOCKED)"
    )
    deleted = 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(sql, [cutoff, *params, BATCH])
            count = cursor.rowcount
        deleted += count
        if count < BATCH:
            return deleted


def outbox_prune(now: datetime | None = None) -> int:
    """Dispatched outbox rows older than OUTBOX_RETENTION_HOURS — and never younger than twice the sweeper's
    deadline, whose look at an item's latest publish entry needs them."""
    from pipeline.housekeeping import sweeper_deadline

    keep = max(timedelta(hours=settings.OUTBOX_RETENTION_HOURS), timedelta(seconds=2 * sweeper_deadline()))
    return outbox_events_prune(dispatched_before=(now or timezone.now()) - keep)


def consumed_events_prune(now: datetime | None = None) -> int:
    """Records that a group consumed an event, older than CONSUMED_EVENT_RETENTION_HOURS: a redelivery of an
    event that old cannot happen (entries are given up after a few deliveries)."""
    cutoff = (now or timezone.now()) - timedelta(hours=settings.CONSUMED_EVENT_RETENTION_HOURS)
    return _delete_before(ConsumedEvent, "consumed_at", cutoff)


def llm_calls_roll_up(now: datetime | None = None) -> int:
    """Move model-call rows older than LLM_CALL_RETENTION_HOURS into the hourly roll-up (LLMCallHourly), in
    one statement per batch: the rows deleted are exactly the rows added, so nothing is counted twice."""
    cutoff = (now or timezone.now()) - timedelta(hours=settings.LLM_CALL_RETENTION_HOURS)
    calls, hourly = LLMCall._meta.db_table, LLMCallHourly._meta.db_table
    sql = f"""
        WITH gone AS (
            DELETE FROM {calls} WHERE id IN (
                SELECT id FROM {calls} WHERE created_at < %s ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED
            )
            RETURNING created_at, prompt, model, outcome, latency_ms, input_tokens, output_tokens, reasoning_tokens
        ), merged AS (
            INSERT INTO {hourly} AS h (hour, prompt, model, outcome, calls, latency_ms_sum, latency_ms_max,
                                       input_tokens, output_tokens, reasoning_tokens)
            SELECT date_trunc('hour', created_at), prompt, model, outcome, count(*), sum(latency_ms),
                   max(latency_ms), sum(input_tokens), sum(output_tokens), sum(reasoning_tokens)
            FROM gone GROUP BY 1, 2, 3, 4
            ON CONFLICT (hour, prompt, model, outcome) DO UPDATE SET
                calls = h.calls + EXCLUDED.calls,
                latency_ms_sum = h.latency_ms_sum + EXCLUDED.latency_ms_sum,
                latency_ms_max = GREATEST(h.latency_ms_max, EXCLUDED.latency_ms_max),
                input_tokens = h.input_tokens + EXCLUDED.input_tokens,
                output_tokens = h.output_tokens + EXCLUDED.output_tokens,
                reasoning_tokens = h.reasoning_tokens + EXCLUDED.reasoning_tokens
            RETURNING 1
        )
        SELECT count(*) FROM gone
    """  # noqa: S608 - table names from meta
    moved = 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(sql, [cutoff, BATCH])
            count = cursor.fetchone()[0]
        moved += count
        if count < BATCH:
            return moved


def audit_events_prune(now: datetime | None = None) -> int:
    """Audit rows older than AUDIT_RETENTION_DAYS; 0 (the default) keeps them all."""
    if not settings.AUDIT_RETENTION_DAYS:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=settings.AUDIT_RETENTION_DAYS)
    return _delete_before(AuditEvent, "recorded_at", cutoff)


def feed_impressions_prune(now: datetime | None = None) -> int:
    """Impression-log rows served more than FEED_IMPRESSION_RETENTION_DAYS ago (docs/feed-log.md)."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.FEED_IMPRESSION_RETENTION_DAYS)
    return _delete_before(FeedImpression, "served_at", cutoff)


def dead_letters_prune(now: datetime | None = None) -> int:
    """Dead letters closed (resolved, or requeued) more than DEAD_LETTER_RETENTION_DAYS ago. Open ones stay
    until a person (or the auto-requeue job) deals with them."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.DEAD_LETTER_RETENTION_DAYS)
    closed = (DeadLetterState.RESOLVED, DeadLetterState.REQUEUED)
    return _delete_before(DeadLetter, "updated_at", cutoff, extra="AND state IN (%s, %s)", params=closed)


def retention_run(now: datetime | None = None) -> dict[str, int]:
    """Every retention, in turn; returns what each removed."""
    from django.contrib.sessions.models import Session

    now = now or timezone.now()
    counts = {
        "outbox_events": outbox_prune(now),
        "consumed_events": consumed_events_prune(now),
        "llm_calls_rolled_up": llm_calls_roll_up(now),
        "audit_events": audit_events_prune(now),
        "feed_impressions": feed_impressions_prune(now),
        "dead_letters_superseded": dead_letters_resolve_superseded(),
        "dead_letters_not_handled": dead_letters_resolve_not_handled(),
        "dead_letters": dead_letters_prune(now),
        "sessions": Session.objects.filter(expire_date__lt=now).delete()[0],
    }
    if any(counts.values()):
        log.info("retention: %s", ", ".join(f"{name} {count}" for name, count in counts.items() if count))
    return counts
