"""The reader meets an entry of a type its stream carries that its group does not handle: acknowledged and counted,
never handed to a handler nor dead-lettered; a type the stream does not carry is still a dead letter
(docs/stream-runtime.md, "Event types")."""

from __future__ import annotations

import queue

import pytest

from pipeline.runtime import declare_stream_types, instruments
from pipeline.runtime import event as event_module
from pipeline.runtime.reading import Reader
from pipeline.streams import text
from tests.pipeline.runtime.conftest import envelope
from tests.pipeline.runtime.consumers import TEST_TYPE
from tests.pipeline.runtime.test_parts import (  # noqa: F401 - `raw` is a fixture
    GROUP,
    STREAM,
    member,
    pending,
    raw,
    run_until_stopped,
    scheduler,
    shared,
)

OTHER_TYPE = "io.eigenflux.test.other.v1"


@pytest.fixture
def stream_carries_two_types():
    """The parts' stream declared to carry TEST_TYPE (NoopConsumer handles it) and OTHER_TYPE (it does not)."""
    saved = dict(event_module._stream_types)
    declare_stream_types({STREAM: frozenset({TEST_TYPE, OTHER_TYPE})})
    yield
    event_module._stream_types.clear()
    event_module._stream_types.update(saved)


def test_the_reader_acknowledges_a_type_its_stream_carries_but_the_group_does_not_handle_and_counts_it(
    raw,  # noqa: F811 - the imported fixture
    stream_carries_two_types,
):
    handled = text(raw.xadd(STREAM, envelope(subject="a")))
    raw.xadd(STREAM, envelope(subject="b", event_type=OTHER_TYPE))
    unknown = text(raw.xadd(STREAM, envelope(subject="c", event_type="io.eigenflux.test.unknown.v1")))
    counter = instruments.NOT_HANDLED.labels(STREAM, GROUP, OTHER_TYPE)
    before = counter._value.get()
    s = scheduler()
    parts = shared(member(raw), s)
    Reader(parts, batch_size=10, block_ms=10).read_once()
    parts.acker.stop()
    run_until_stopped(parts.acker)
    assert set(pending(raw)) == {handled, unknown}  # the unhandled type was acknowledged; the others wait
    assert counter._value.get() == before + 1
    work = {}
    while True:
        try:
            delivery = s.next_work(timeout=0.01)
        except queue.Empty:
            break
        work[delivery.message_id] = delivery
    assert set(work) == {handled, unknown}  # nothing of `other` reaches a handler or the dead letter
    assert work[handled].verdict is None
    verdict = work[unknown].verdict
    assert verdict.error_class == "permanent" and "unknown type 'io.eigenflux.test.unknown.v1'" in verdict.error
