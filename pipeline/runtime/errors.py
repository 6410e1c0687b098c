"""The named outcomes a handler raises; the runtime, not the handler, turns them into ACK, retry or dead letter."""

from __future__ import annotations


class RetryLater(Exception):
    """Transient failure: the entry stays pending and is retried with backoff, then dead-lettered as transient.

    `delay` (seconds) overrides the policy's next delay, e.g. from a 429's Retry-After.
    """

    def __init__(self, message: str = "", *, delay: float | None = None):
        super().__init__(message)
        self.delay = delay


class DeadLetterNow(Exception):
    """Permanent failure (malformed entry, unknown item): dead-lettered at once."""


class NothingToDo(Exception):
    """The entry needs no work (e.g. the item is already at a checkpoint): ACK it."""


class LeaseLost(Exception):
    """This process no longer owns the entry: make no further call, commit nothing."""
