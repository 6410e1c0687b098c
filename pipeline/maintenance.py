"""Hourly maintenance as a self-rescheduling django-rq job (needs `rqworker --with-scheduler`)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import django_rq

from items.services.login import login_challenges_prune
from items.services.publish import idempotency_keys_prune
from items.services.unseen_feed import feed_deliveries_prune

INTERVAL_SECONDS = 3600


def maintenance_job() -> int:
    """Prune expired Idempotency-Keys, feed deliveries past the seen window and old login challenges, then
    schedule the next run; returns how many rows went."""
    try:
        return idempotency_keys_prune() + feed_deliveries_prune() + login_challenges_prune()
    finally:
        maintenance_schedule()


def maintenance_schedule(*, queue_name: str = "default"):
    """Schedule the next run; the job id is the time slot, so scheduling twice makes one chain."""
    when = datetime.now(UTC) + timedelta(seconds=INTERVAL_SECONDS)
    slot = math.floor(when.timestamp() / INTERVAL_SECONDS)
    return django_rq.get_queue(queue_name).enqueue_at(
        datetime.fromtimestamp(slot * INTERVAL_SECONDS, tz=UTC),
        maintenance_job,
        job_id=f"eigenflux-maintenance-{slot}",
        result_ttl=INTERVAL_SECONDS * 2,
    )
