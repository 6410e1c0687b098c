"""A tiny OTLP/HTTP trace receiver for tests: subprocesses export to it (OTEL_EXPORTER_OTLP_ENDPOINT=its url) and
the test reads the spans back, in the same plain form as spans from the SDK's in-memory exporter."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass
class PlainSpan:
    """The parts of a span the tests look at; ids in lower-case hex."""

    name: str
    service: str
    trace_id: str
    span_id: str
    parent_span_id: str  # "" for a root
    kind: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    links: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # (trace_id, span_id, attributes)
    status: str = "UNSET"

    @property
    def duration_ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


def _value(value) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


def _attributes(pairs) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


_KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
_STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}


def plain_spans_from_otlp(body: bytes) -> list[PlainSpan]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        service = str(_attributes(resource_spans.resource.attributes).get("service.name", ""))
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    PlainSpan(
                        name=span.name,
                        service=service,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        kind=_KINDS.get(span.kind, str(span.kind)),
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        attributes=_attributes(span.attributes),
                        links=[
                            (link.trace_id.hex(), link.span_id.hex(), _attributes(link.attributes))
                            for link in span.links
                        ],
                        status=_STATUS.get(span.status.code, str(span.status.code)),
                    )
                )
    return spans


def plain_span_from_sdk(span) -> PlainSpan:
    """A span from the SDK's InMemorySpanExporter in the same form."""
    context = span.get_span_context()
    return PlainSpan(
        name=span.name,
        service=str(span.resource.attributes.get("service.name", "")),
        trace_id=format(context.trace_id, "032x"),
        span_id=format(context.span_id, "016x"),
        parent_span_id=format(span.parent.span_id, "016x") if span.parent is not None else "",
        kind=span.kind.name,
        start_ns=span.start_time,
        end_ns=span.end_time,
        attributes=dict(span.attributes or {}),
        links=[
            (format(link.context.trace_id, "032x"), format(link.context.span_id, "016x"), dict(link.attributes or {}))
            for link in span.links
        ],
        status=span.status.status_code.name,
    )


class OTLPReceiver:
    """Collects the spans POSTed to /v1/traces (protobuf, optionally gzipped) on 127.0.0.1, a free port."""

    def __init__(self) -> None:
        self.spans: list[PlainSpan] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                spans = plain_spans_from_otlp(body)
                with receiver._lock:
                    receiver.spans.extend(spans)
                payload = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def env(self) -> dict[str, str]:
        """Environment that makes a subprocess export its spans here, quickly."""
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": self.url, "OTEL_BSP_SCHEDULE_DELAY": "100"}

    def snapshot(self) -> list[PlainSpan]:
        with self._lock:
            return list(self.spans)

    def start(self) -> OTLPReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
