"""Periodic maintenance as a self-rescheduling django-rq job (needs `rqworker --with-scheduler`): expired
Idempotency-Keys, feed deliveries past the seen window, old login challenges and every retention of
pipeline.retention, every MAINTENANCE_INTERVAL_SECONDS (default hourly).
`make run` (eigenflux.devstack) schedules it; scheduling twice makes one chain."""

from __future__ import annotations

import logging
import math
from datetime import UTC, datetime, timedelta

import django_rq
from django.conf import settings

from items.services.login import login_challenges_prune
from items.services.publish import idempotency_keys_prune
from items.services.unseen_feed import feed_deliveries_prune
from pipeline.retention import retention_run

log = logging.getLogger(__name__)


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
    """Schedule the next run; the job id is the time slot, so scheduling twice makes one chain."""
    interval = settings.MAINTENANCE_INTERVAL_SECONDS
    when = datetime.now(UTC) + timedelta(seconds=interval)
    slot = math.floor(when.timestamp() / interval)
    return django_rq.get_queue(queue_name).enqueue_at(
        datetime.fromtimestamp(slot * interval, tz=UTC),
        maintenance_job,
        job_id=f"eigenflux-maintenance-{slot}",
        result_ttl=interval * 2,
        failure_ttl=24 * 3600,
    )
