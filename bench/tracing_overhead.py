"""What tracing adds per stream entry handled, per outbox write and per model call attempt: first with tracing
off (no endpoint: the default), then with the SDK installed and spans dropped by a no-op exporter (the cost of
making the spans, not of sending them).

No database or Redis: the helpers of eigenflux.base.tracing are timed alone, as the runtime, the outbox and the
model layer call them. Run: .venv/bin/python bench/tracing_overhead.py [iterations]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django

django.setup()

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult  # noqa: E402

from eigenflux.base import tracing  # noqa: E402
from items.outbox import outbox_write_span  # noqa: E402
from pipeline.llm.tracing import model_call_span  # noqa: E402
from pipeline.relay import end_relay_spans, relay_spans  # noqa: E402
from pipeline.runtime.event import Event  # noqa: E402
from pipeline.runtime.tracing import handling_span  # noqa: E402


class DropSpans(SpanExporter):
    def export(self, spans):
        return SpanExportResult.SUCCESS


def event() -> Event:
    return Event(
        stream="stream:item:publish",
        group="cg:item:publish",
        message_id="1-0",
        delivery_count=1,
        envelope={},
        id="6f1c2d7e-0000-4000-8000-000000000000",
        type="io.eigenflux.item.published.v1",
        subject="1",
        data={"item_id": "1"},
        replay=False,
        correlation_id="",
        causation_id="",
        traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    )


def per_call_us(function, iterations: int) -> float:
    function()
    started = time.perf_counter()
    for _ in range(iterations):
        function()
    return (time.perf_counter() - started) / iterations * 1e6


def measure(iterations: int) -> dict[str, float]:
    entry = event()

    def handling() -> None:
        with handling_span(entry, consumer="c", delivery_count=1):
            pass

    def outbox_write() -> None:
        with outbox_write_span(stream="stream:item:publish", event_type="t", traceparent=None) as span:
            tracing.set_message_id(span, "e")

    def relay() -> None:
        envelope = {"id": "e", "type": "t", "traceparent": entry.traceparent}
        end_relay_spans(relay_spans([("stream:item:publish", envelope)]), ["1-0"])

    def model_call() -> None:
        model_call_span(prompt="process_item", model="m", attempt=1).end("ok", input_tokens=1, output_tokens=1)

    return {
        name: per_call_us(function, iterations)
        for name, function in (
            ("handler run (process span)", handling),
            ("outbox write (create span)", outbox_write),
            ("relayed event (publish span)", relay),
            ("model call attempt", model_call),
        )
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("iterations", type=int, nargs="?", default=20_000, help="iterations per measure (20000)")
    iterations = parser.parse_args().iterations
    off = measure(iterations)
    assert tracing.setup("bench", span_exporter=DropSpans(), batch=True)
    on = measure(iterations)
    tracing.uninstall()
    print(f"{'per':<30} {'tracing off µs':>15} {'tracing on µs':>15}   ({iterations} iterations each)")
    for name in off:
        print(f"{name:<30} {off[name]:>15.2f} {on[name]:>15.2f}")


if __name__ == "__main__":
    main()
