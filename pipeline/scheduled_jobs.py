"""The recurring django-rq jobs (need `rqworker --with-scheduler`), each scheduling its next run when it ends:
- maintenance, every MAINTENANCE_INTERVAL_SECONDS (default hourly): expired Idempotency-Keys, feed deliveries
  past the seen window, old login challenges and every retention of pipeline.retention;
- dead-letter auto-requeue, every DEAD_LETTER_AUTO_REQUEUE_INTERVAL_SECONDS: archive what waits in the
  dead-letter streams, then requeue transient letters a bounded number of times (pipeline.dead_letter_table).

`manage.py schedule_jobs` (run by the deployments and `make run` before the worker starts) puts both on the
schedule. A job's id is its time slot, so scheduling twice never makes two chains. A one-off run:
`django_rq.enqueue(maintenance_job)`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import django_rq
from django.conf import settings

from items.services.login import login_challenges_prune
from items.services.publish import idempotency_keys_prune
from items.services.unseen_feed import feed_deliveries_prune
from pipeline.consumers.dead_letter_archive import dlq_archive_drain
from pipeline.dead_letter_table import dead_letters_auto_requeue
from pipeline.retention import retention_run

log = logging.getLogger(__name__)

MAINTENANCE_JOB_PREFIX = "eigenflux-maintenance"
AUTO_REQUEUE_JOB_PREFIX = "eigenflux-dead-letters-auto-requeue"


def _schedule_in_slot(
    job: Callable[[], Any], *, prefix: str, interval: float, queue_name: str, at: datetime | None = None
):
    """Enqueue `job` at the start of the next time slot (or exactly `at`), with the slot in its id: a second
    call for the same slot replaces the first instead of starting a second chain. Returns the rq Job."""
    when = at or datetime.now(UTC) + timedelta(seconds=interval)
    slot = math.floor(when.timestamp() / interval)
    return django_rq.get_queue(queue_name).enqueue_at(
        datetime.fromtimestamp(slot * interval, tz=UTC) if at is None else when,
        job,
        job_id=f"{prefix}-{slot}",
        result_ttl=interval * 2,
        failure_ttl=24 * 3600,
    )


# --- maintenance -------------------------------------------------------------------------------------------


def maintenance_run() -> dict[str, int]:
    """One round of pruning; returns what each part removed."""
    return {
        "idempotency_keys": idempotency_keys_prune(),
        "feed_deliveries": feed_deliveries_prune(),
        "login_challenges": login_challenges_prune(),
        **retention_run(),
    }


def maintenance_job() -> dict[str, int]:
    """The django-rq job: prune, then schedule the next run."""
    try:
        return maintenance_run()
    finally:
        maintenance_schedule()


def maintenance_schedule(*, queue_name: str = "default"):
    """Schedule the next maintenance run. Returns the rq Job."""
    return _schedule_in_slot(
        maintenance_job,
        prefix=MAINTENANCE_JOB_PREFIX,
        interval=settings.MAINTENANCE_INTERVAL_SECONDS,
        queue_name=queue_name,
    )


# --- dead-letter auto-requeue ------------------------------------------------------------------------------


def dead_letters_auto_requeue_job() -> int:
    """The django-rq job: archive what waits in the dead-letter streams, requeue, schedule the next run."""
    try:
        dlq_archive_drain()
        return dead_letters_auto_requeue()
    finally:
        dead_letters_schedule()


def dead_letters_schedule(*, queue_name: str = "default", at: datetime | None = None):
    """Schedule the next auto-requeue run. Returns the rq Job."""
    return _schedule_in_slot(
        dead_letters_auto_requeue_job,
        prefix=AUTO_REQUEUE_JOB_PREFIX,
        interval=settings.DEAD_LETTER_AUTO_REQUEUE_INTERVAL_SECONDS,
        queue_name=queue_name,
        at=at,
    )
