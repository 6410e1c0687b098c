"""The django-rq job that writes the reader suggestion of an item a moderator published (items.services.suggestions):
the approval runs in a web request, so the model is asked here, by the worker (`rqworker default`), not there."""

from __future__ import annotations

import logging

import django_rq
from redis import RedisError

from items.services.suggestions import item_suggestion_claim, item_suggestion_save
from pipeline import llm

log = logging.getLogger(__name__)

JOB_PREFIX = "eigenflux-suggestion"


def item_suggestion_enqueue(item_id: int) -> None:
    """items' suggestion port: queue the job (one id per item, so a second approval replaces rather than adds).
    Best effort like the suggestion itself: a queue that cannot be reached leaves the item without one."""
    try:
        django_rq.get_queue("default").enqueue(
            item_suggestion_job, item_id, job_id=f"{JOB_PREFIX}-{item_id}", result_ttl=3600, failure_ttl=24 * 3600
        )
    except RedisError as exc:
        log.warning("could not queue the suggestion of item %s: %s", item_id, exc.__class__.__name__)


def item_suggestion_job(item_id: int) -> bool:
    """Ask for the suggestion of a published item that was never asked for one; True when it was written. The
    claim comes first, so the model is asked at most once per item; a model failure leaves it empty (logged)."""
    item = item_suggestion_claim(item_id=item_id)
    if item is None:
        return False
    try:
        answer = llm.suggest_action(
            content=item.raw.content, summary=item.summary, broadcast_type=item.broadcast_type, item_id=item_id
        )
    except llm.ModelError as exc:
        log.warning("suggestion failed for item %s: %s", item_id, exc.__class__.__name__)
        return False
    return item_suggestion_save(item_id=item_id, suggestion=answer.value.suggestion)
