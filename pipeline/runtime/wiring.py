"""What the parts of one runner share (docs/delivery.md#runtime): built once by ConsumerRunner and handed to
the reader, the handlers and the lease keeper, so that all of them hold the same scheduler (and its one
lock), the same ACK queue and the same stop signal."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from pipeline.runtime.acking import Acker
from pipeline.runtime.consumer import Consumer
from pipeline.runtime.deliveries import DeliveryCounts
from pipeline.runtime.membership import Membership
from pipeline.runtime.retry import RetryPolicy
from pipeline.runtime.scheduling import Scheduler


@dataclass(frozen=True)
class Shared:
    member: Membership
    consumer: Consumer
    policy: RetryPolicy
    scheduler: Scheduler
    acker: Acker
    counts: DeliveryCounts
    stopping: threading.Event  # stop reading and starting handlers
    wake_keeper: threading.Event  # a retry or a pause is waiting, or a breaker closed: the keeper turns now
    lease_seconds: float = 0.0  # the entry lease (0: ownership is asked of Redis at every check, Lease)
