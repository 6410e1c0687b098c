"""The ranker's training set (docs/feed-ranker.md#labels), read from the impression log and the readers'
feedback and feed events: one labelled row per logged impression that carries the contract's features.

Attribution is the impression log's (items.feed_log): feedback or a feed event belongs to the latest impression
of that item to that reader served at or before it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import numpy as np
from django.db import connection

from items.models import FeedEvent, FeedImpression, ItemFeedback
from items.ranker.contract import CONTRACT, WIDTH


@dataclass(frozen=True)
class TrainingSet:
    features: np.ndarray  # rows x WIDTH
    labels: np.ndarray  # 1 positive, 0 negative
    pages: np.ndarray  # each row's page id (as text): the logged rankings nDCG reorders
    propensities: np.ndarray
    days: np.ndarray  # each row's UTC day served (datetime64[D])
    readers: np.ndarray
    ignored: int  # logged impressions with the contract's features but no label

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, keep: np.ndarray) -> TrainingSet:
        return TrainingSet(
            features=self.features[keep],
            labels=self.labels[keep],
            pages=self.pages[keep],
            propensities=self.propensities[keep],
            days=self.days[keep],
            readers=self.readers[keep],
            ignored=0,
        )

    def digest(self) -> str:
        """A hash of the rows and labels: the model's provenance names the data it saw."""
        digest = hashlib.sha256()
        for array in (self.features, self.labels, self.propensities, self.readers):
            digest.update(np.ascontiguousarray(array).tobytes())
        return digest.hexdigest()[:16]


def _sql() -> str:
    impressions, feedback, events = (m._meta.db_table for m in (FeedImpression, ItemFeedback, FeedEvent))
    # `next_served` bounds each impression's attribution window (items.feed_log); `last_answered` is the lowest
    # place of its page the reader answered, so an unanswered place above it was read past (a skip).
    return f"""
        WITH imp AS (
            SELECT i.page_id, i.served_at, i.reader_id, i.item_id, i.position, i.features, i.propensity,
                   lead(i.served_at) OVER (PARTITION BY i.reader_id, i.item_id ORDER BY i.served_at, i.id)
                       AS next_served
            FROM {impressions} i
            WHERE i.served_at >= %(since)s AND i.contract = %(contract)s AND i.features IS NOT NULL
                AND NOT i.reader_id = ANY(%(excluded)s)
        ), answered AS (
            SELECT imp.*, f.score, EXISTS (
                   SELECT 1 FROM {events} e WHERE e.agent_id = imp.reader_id AND e.item_id = imp.item_id
                   AND e.created_at >= imp.served_at AND (imp.next_served IS NULL OR e.created_at < imp.next_served)
               ) AS acted, EXISTS (
                   SELECT 1 FROM {events} e WHERE e.agent_id = imp.reader_id AND e.item_id = imp.item_id
                   AND e.created_at < imp.served_at
               ) OR EXISTS (
                   SELECT 1 FROM {feedback} b WHERE b.reader_id = imp.reader_id AND b.item_id = imp.item_id
                   AND b.created_at < imp.served_at
               ) AS before
            FROM imp LEFT JOIN {feedback} f ON f.reader_id = imp.reader_id AND f.item_id = imp.item_id
                AND f.created_at >= imp.served_at AND (imp.next_served IS NULL OR f.created_at < imp.next_served)
        ), skips AS (
            SELECT answered.*, score IS NULL AND NOT acted AND position < coalesce(
                   max(position) FILTER (WHERE score IS NOT NULL OR acted) OVER (PARTITION BY page_id), 0)
                   AS skipped
            FROM answered
        )
        SELECT page_id::text, (served_at AT TIME ZONE 'UTC')::date, reader_id, features, coalesce(propensity, 1),
               score, acted, before, skipped,
               count(*) FILTER (WHERE skipped) OVER (PARTITION BY reader_id, item_id)
        FROM skips ORDER BY served_at, page_id, position
    """  # noqa: S608 - table names from model metadata, values as parameters


def label(
    *, score: int | None, acted: bool, skipped: bool, skips: int, min_skips: int, answered_before: bool = False
) -> int | None:
    """1: a follow-up (a feed event) or a +1/+2; 0: a -1, or an item the reader read past unanswered (it
    answered one below it on the same page) at least `min_skips` times; None (ignored): a 0 score, an unanswered
    item nothing shows was read (no answer below it), or an item the reader had answered before this impression
    (served again, it owes no second answer)."""
    if answered_before:
        return None
    if score == -1:
        return 0
    if acted or (score is not None and score >= 1):
        return 1
    if skipped and skips >= min_skips:
        return 0
    return None


def training_set(*, since: datetime, skips: int, excluded_readers: frozenset[int] = frozenset()) -> TrainingSet:
    """Every labelled impression served since `since` under the current contract, oldest first, but those of
    `excluded_readers` (readers held out for an evaluation, bench/feed_sim.py)."""
    params: dict[str, Any] = {"since": since, "contract": CONTRACT, "excluded": sorted(excluded_readers)}
    with connection.cursor() as cursor:
        cursor.execute(_sql(), params)
        rows = cursor.fetchall()
    kept, labels, ignored = [], [], 0
    for row in rows:
        value = label(score=row[5], acted=row[6], answered_before=row[7], skipped=row[8], skips=row[9], min_skips=skips)
        if value is None or len(row[3]) != WIDTH:
            ignored += 1
            continue
        kept.append(row)
        labels.append(value)
    days: list[date] = [row[1] for row in kept]
    return TrainingSet(
        features=np.array([row[3] for row in kept], dtype=float).reshape(len(kept), WIDTH),
        labels=np.array(labels, dtype=float),
        pages=np.array([row[0] for row in kept], dtype=object),
        propensities=np.array([row[4] for row in kept], dtype=float),
        days=np.array(days, dtype="datetime64[D]"),
        readers=np.array([row[2] for row in kept], dtype=np.int64),
        ignored=ignored,
    )
