"""Reads of the impression log (docs/feed-log.md): which impression a reader's feedback or feed event belongs to,
and the per-day, per-ranking-version, per-position figures `manage.py feed_report` prints.

Attribution rule: a reader's feedback (or feed event) on an item belongs to the latest impression of that item
to that reader served at or before it. An item served twice (the for_me feed has no seen memory) thus credits
the page the reader was answering, never both."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from items.models import FeedEvent, FeedImpression, ItemFeedback


def impression_for(*, reader_id: int, item_id: int, at: datetime) -> FeedImpression | None:
    """The impression a reader's feedback or feed event on `item_id` at `at` joins (None if never served)."""
    return (
        FeedImpression.objects.filter(reader_id=reader_id, item_id=item_id, served_at__lte=at)
        .order_by("-served_at", "-pk")
        .first()
    )


@dataclass(frozen=True)
class ReportRow:
    day: date
    ranking_version: str
    position: int  # positions beyond the report's last one are counted together under last + 1
    impressions: int
    scored: int  # impressions that received a score from their reader
    positive: int  # ... a +1 or +2
    negative: int  # ... a -1
    acted: int  # impressions with at least one feed event (surface, question, discussion, task)

    @property
    def feedback_rate(self) -> float:
        return self.scored / self.impressions if self.impressions else 0.0


def _report_sql(*, version: bool, feed: bool) -> str:
    impressions, feedback, events = (m._meta.db_table for m in (FeedImpression, ItemFeedback, FeedEvent))
    # `next_served` bounds each impression's attribution window: feedback after the next impression of the same
    # item to the same reader belongs to that one. Computed before the version filter, over the whole window.
    return f"""
        WITH imp AS (
            SELECT i.served_at, i.ranking_version, i.position, i.reader_id, i.item_id, i.feed,
                   lead(i.served_at) OVER (PARTITION BY i.reader_id, i.item_id ORDER BY i.served_at, i.id)
                       AS next_served
            FROM {impressions} i WHERE i.served_at >= %(since)s
        ), joined AS (
            SELECT (imp.served_at AT TIME ZONE 'UTC')::date AS day, imp.ranking_version,
                   LEAST(imp.position, %(last)s + 1) AS position, f.score,
                   EXISTS (
                       SELECT 1 FROM {events} e WHERE e.agent_id = imp.reader_id AND e.item_id = imp.item_id
                       AND e.created_at >= imp.served_at AND (imp.next_served IS NULL OR e.created_at < imp.next_served)
                   ) AS acted
            FROM imp LEFT JOIN {feedback} f ON f.reader_id = imp.reader_id AND f.item_id = imp.item_id
                AND f.created_at >= imp.served_at AND (imp.next_served IS NULL OR f.created_at < imp.next_served)
            WHERE TRUE {"AND imp.ranking_version = %(version)s" if version else ""}
                       {"AND imp.feed = %(feed)s" if feed else ""}
        )
        SELECT day, ranking_version, position, count(*), count(score),
               count(*) FILTER (WHERE score > 0), count(*) FILTER (WHERE score < 0), count(*) FILTER (WHERE acted)
        FROM joined GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    """  # noqa: S608 - table names from model metadata, values as parameters


def feed_report(
    *, days: int, version: str | None = None, feed: str | None = None, last_position: int = 20
) -> list[ReportRow]:
    """Impressions of the last `days` days (from midnight UTC `days - 1` days ago), with their feedback and feed
    events, per day, ranking version and position."""
    if days < 1 or last_position < 1:
        raise ValueError("days and last_position must be at least 1")
    today = timezone.now().astimezone(UTC).date()
    since = datetime.combine(today - timedelta(days=days - 1), time.min, tzinfo=UTC)
    params: dict[str, Any] = {"since": since, "last": last_position, "version": version, "feed": feed}
    with connection.cursor() as cursor:
        cursor.execute(_report_sql(version=version is not None, feed=feed is not None), params)
        return [ReportRow(*row) for row in cursor.fetchall()]
