"""Retry policy: a pure object deciding the next delay from the delivery attempt, or None to dead-letter."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter.

    `attempt` is the delivery that just failed (1 = first delivery). A handler runs at most `max_retries`
    times: once delivery `max_retries` has failed, `next_delay` returns None (dead-letter), matching
    docs/delivery.md#retries-and-dead-letters. `max_retries=None` never gives up (for a
    consumer that must not lose an entry, such as the dead-letter archiver): delays grow up to `max_delay`.
    The jitter only ever shortens a delay by at most `jitter` of it, so with factor >= 2 and jitter < 0.5
    successive delays still strictly grow.
    """

    max_retries: int | None = 3
    base: float = 1.0
    factor: float = 2.0
    max_delay: float = 300.0
    jitter: float = 0.25

    def __post_init__(self) -> None:
        if (self.max_retries is not None and self.max_retries < 1) or self.base < 0 or self.factor < 1:
            raise ValueError(f"invalid retry policy {self!r}")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"invalid retry policy {self!r}")

    @property
    def unlimited(self) -> bool:
        return self.max_retries is None

    def exhausted(self, deliveries: int) -> bool:
        """More deliveries than the policy allows (never, when unlimited)."""
        return self.max_retries is not None and deliveries > self.max_retries

    def next_delay(self, attempt: int, error: BaseException | None = None) -> float | None:
        if self.max_retries is not None and attempt >= self.max_retries:
            return None
        hint = getattr(error, "delay", None)
        if isinstance(hint, int | float) and hint >= 0:
            return min(float(hint), self.max_delay)
        delay = min(self.base * self.factor ** min(max(attempt - 1, 0), 64), self.max_delay)
        return delay * (1 - self.jitter * random.random())

    def span(self) -> float:
        """The longest an entry can wait between its first and last delivery (no jitter); unlimited: inf."""
        if self.max_retries is None:
            return float("inf")
        return sum(min(self.base * self.factor ** (a - 1), self.max_delay) for a in range(1, self.max_retries))
