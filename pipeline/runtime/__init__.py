"""The stream runtime (docs/delivery.md#runtime): the consumer API handlers are written against, and the engine that
runs them."""

from pipeline.runtime.consumer import Consumer, load_consumers, register, registry
from pipeline.runtime.deadletter import GiveUp
from pipeline.runtime.errors import DeadLetterNow, LeaseLost, NothingToDo, RetryLater
from pipeline.runtime.event import Event, Lease, consume_once
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
    "load_consumers",
    "register",
    "registry",
]
