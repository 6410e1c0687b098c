"""The stream runtime (docs/delivery.md#runtime): the consumer API handlers are written against, and the engine that
runs them."""

from pipeline.runtime.consumer import Consumer, register, registry
from pipeline.runtime.dead_lettering import GiveUp
from pipeline.runtime.errors import DeadLetterNow, LeaseLost, NothingToDo, RetryLater
from pipeline.runtime.event import Event, Lease, consume_once, declare_stream_types, use_consumed_events
from pipeline.runtime.retry import RetryPolicy

__all__ = [
    "Consumer",
    "DeadLetterNow",
    "Event",
    "GiveUp",
    "Lease",
    "LeaseLost",
    "NothingToDo",
    "RetryLater",
    "RetryPolicy",
    "consume_once",
    "declare_stream_types",
    "register",
    "registry",
    "use_consumed_events",
]
