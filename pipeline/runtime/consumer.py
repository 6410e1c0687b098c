"""The consumer API: one declared class per consumer module, registered by name."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from django.conf import settings

from pipeline.runtime.event import parse_entry
from pipeline.runtime.retry import RetryPolicy

if TYPE_CHECKING:
    from pipeline.runtime.dead_lettering import GiveUp
    from pipeline.runtime.event import Event, Lease

_REGISTRY: dict[str, type[Consumer]] = {}
_REQUIRED = ("name", "stream", "group", "event_types")


class Consumer:
    """Subclass, declare the class attributes, implement handle(event); register with @register.

    Optional knobs (None = the PIPELINE_* setting at run time): concurrency, lease_seconds, max_retries,
    batch_size (entries held in this process at most, counting those waiting behind an entry of the same
    subject; default 2 x concurrency — a read never takes more entries than there are idle handlers),
    retry_policy (a RetryPolicy; default exponential backoff from the settings), start_id (where a newly
    created group starts: "0" = every entry already in the stream, "$" = only new ones),
    dead_letter_stream (False: `on_dead_letter` is the entry's final destination and nothing is written to
    `{<stream>}:dlq`; for the dead-letter archiver itself, whose own letters nothing would read), ignores (the
    types its stream carries that this group leaves to the others: acknowledged unhandled, as is any declared
    type of the stream it lists in neither set; declaring them records the decision, which a test checks).
    """

    name: ClassVar[str]
    stream: ClassVar[str]
    group: ClassVar[str]
    event_types: ClassVar[frozenset[str]]

    concurrency: ClassVar[int | None] = None
    lease_seconds: ClassVar[float | None] = None
    max_retries: ClassVar[int | None] = None
    batch_size: ClassVar[int | None] = None
    retry_policy: ClassVar[RetryPolicy | None] = None
    start_id: ClassVar[str] = "0"
    dead_letter_stream: ClassVar[bool] = True
    ignores: ClassVar[frozenset[str]] = frozenset()

    def warm_up(self) -> None:
        """Loads what handle() would load on its first call (models, dictionaries): run once when the consumer starts,
        in a thread of its own; the consumer reads and reclaims no entry until it is over, so no entry pays for it
        while its lease runs. Default: nothing."""

    def handle(self, event: Event) -> None:
        # Never reached for a registered consumer: @register refuses a class that does not override this.
        raise TypeError(f"{type(self).__qualname__} does not implement handle(event)")

    def on_dead_letter(self, event: Event | None, reason: GiveUp) -> None:
        """The final hook: the runtime is giving up on an entry (retries or deliveries exhausted, a permanent
        error, a malformed entry — then `event` is None). Runs before the entry is dead-lettered, in a handler
        thread, at least once: make it idempotent. If it raises, the entry stays pending and the hook runs
        again later, so nothing is dead-lettered behind the consumer's back. Default: nothing."""

    def parse(
        self, *, stream: str, group: str, message_id: str, fields: dict[str, str], delivery_count: int, lease: Lease
    ) -> Event:
        """Turn a stream entry into an Event, raising MalformedEntry (dead-lettered as permanent) if it is
        not one. The default reads CloudEvents envelopes; a stream of other records overrides this."""
        return parse_entry(
            stream=stream,
            group=group,
            message_id=message_id,
            fields=fields,
            delivery_count=delivery_count,
            event_types=self.event_types,
            lease=lease,
        )

    # Resolved knobs, read from settings when the runtime starts (not at import).
    def get_concurrency(self) -> int:
        return max(1, self.concurrency or settings.PIPELINE_CONCURRENCY)

    def get_lease_seconds(self) -> float:
        return float(self.lease_seconds or settings.PIPELINE_LEASE_SECONDS)

    def get_retry_policy(self) -> RetryPolicy:
        if self.retry_policy is not None:
            return self.retry_policy
        return RetryPolicy(
            max_retries=self.max_retries or settings.PIPELINE_MAX_RETRIES,
            base=settings.PIPELINE_RETRY_BASE_SECONDS,
            max_delay=settings.PIPELINE_RETRY_MAX_SECONDS,
        )

    def get_batch_size(self) -> int:
        return max(1, self.batch_size or 2 * self.get_concurrency())


def register(cls: type[Consumer]) -> type[Consumer]:
    """Class decorator: validate the declarations and add the consumer to the registry by name."""
    if not (isinstance(cls, type) and issubclass(cls, Consumer)):
        raise TypeError(f"@register expects a Consumer subclass, got {cls!r}")
    missing = [attr for attr in _REQUIRED if not getattr(cls, attr, None)]
    if missing:
        raise TypeError(f"consumer {cls.__qualname__} must declare {', '.join(missing)}")
    for attr in ("name", "stream", "group"):
        if not isinstance(getattr(cls, attr), str):
            raise TypeError(f"consumer {cls.__qualname__}.{attr} must be a str")
    if isinstance(cls.event_types, str) or not all(isinstance(t, str) for t in cls.event_types):
        raise TypeError(f"consumer {cls.__qualname__}.event_types must be a set of type strings")
    cls.event_types = frozenset(cls.event_types)
    cls.ignores = frozenset(cls.ignores)
    if cls.event_types & cls.ignores:
        raise TypeError(f"consumer {cls.__qualname__} both handles and ignores {sorted(cls.event_types & cls.ignores)}")
    if cls.handle is Consumer.handle:
        raise TypeError(f"consumer {cls.__qualname__} must implement handle(event)")
    existing = _REGISTRY.get(cls.name)
    # The same class seen again (a module imported twice under one name) re-registers quietly.
    same = existing is not None and (existing.__module__, existing.__qualname__) == (cls.__module__, cls.__qualname__)
    if existing is not None and not same:
        raise ValueError(f"consumer name {cls.name!r} is already registered by {existing.__qualname__}")
    _REGISTRY[cls.name] = cls
    return cls


def registry() -> dict[str, type[Consumer]]:
    """All registered consumers by name (once the application imported its consumer modules: run_pipeline
    does, through pipeline.consumers.load_consumers())."""
    return dict(_REGISTRY)
