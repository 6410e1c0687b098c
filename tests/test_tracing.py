"""When tracing is installed (eigenflux.base.tracing.setup): only with somewhere to export to. Without an OTLP endpoint
(or with OTEL_SDK_DISABLED / OTEL_TRACES_EXPORTER=none) nothing is installed, nothing instrumented, nothing
exported. The trace tree itself is tested in tests/pipeline/runtime/test_tracing.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from eigenflux.base.tracing import exporter_from_environment
from tests.fakes.otlp_receiver import OTLPReceiver
from tests.pipeline.runtime.fixtures import pipeline_env  # noqa: F401 - fixture
from tests.probes import python_probe

REPO = Path(__file__).resolve().parents[1]
ENDPOINT = "http://127.0.0.1:4318"


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"},  # other OTEL_* variables alone: no
        {"OTEL_EXPORTER_OTLP_ENDPOINT": ""},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_SDK_DISABLED": "true"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_TRACES_EXPORTER": "none"},
    ],
)
def test_no_exporter_without_an_endpoint_or_when_disabled(environ):
    assert exporter_from_environment(environ) is None


@pytest.mark.parametrize(
    "environ",
    [
        {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT},
        {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{ENDPOINT}/v1/traces"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "false"},
    ],
)
def test_the_otlp_http_exporter_when_an_endpoint_is_set(environ):
    assert isinstance(exporter_from_environment(environ), OTLPSpanExporter)


def test_the_console_exporter_on_request():
    assert isinstance(exporter_from_environment({"OTEL_TRACES_EXPORTER": "console"}), ConsoleSpanExporter)


def test_an_unknown_exporter_is_refused_by_name():
    with pytest.raises(ValueError, match="OTEL_TRACES_EXPORTER must be otlp, console or none, not 'zipkin'"):
        exporter_from_environment({"OTEL_TRACES_EXPORTER": "zipkin", "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT})


_PROBE = """
import json
from opentelemetry import trace
from eigenflux.wsgi import application  # sets tracing up for the web role, as gunicorn does
from django.conf import settings
from eigenflux.base import tracing
print(json.dumps({
    "enabled": tracing.enabled(),
    "provider": type(trace.get_tracer_provider()).__name__,
    "middleware": [m for m in settings.MIDDLEWARE if "opentelemetry" in m],
    "service": getattr(trace.get_tracer_provider(), "resource", None) and
        trace.get_tracer_provider().resource.attributes.get("service.name"),
}))
"""


def probe(**env: str) -> dict:
    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return python_probe(_PROBE, {**base, **env})


@pytest.mark.slow
def test_a_web_process_without_an_endpoint_installs_nothing():
    assert probe() == {"enabled": False, "provider": "ProxyTracerProvider", "middleware": [], "service": None}


@pytest.mark.slow
def test_a_web_process_with_an_endpoint_traces_as_eigenflux_web():
    # Nothing listens there and nothing is sent: spans are exported in batches, and the probe makes none.
    found = probe(OTEL_EXPORTER_OTLP_ENDPOINT=ENDPOINT)
    assert found["enabled"] is True and found["provider"] == "TracerProvider"
    assert found["middleware"] == ["opentelemetry.instrumentation.django.middleware.otel_middleware._DjangoMiddleware"]
    assert found["service"] == "eigenflux-web"
    assert probe(OTEL_EXPORTER_OTLP_ENDPOINT=ENDPOINT, OTEL_SERVICE_NAME="edge-web")["service"] == "edge-web"


@pytest.mark.slow
def test_a_worker_job_exports_its_spans_before_the_work_horse_exits(pipeline_env):  # noqa: F811 - the imported fixture
    """rq runs each job in a forked process that leaves with os._exit: TracedWorker flushes after the job."""
    import django_rq

    from pipeline.scheduled_jobs import maintenance_run

    receiver = OTLPReceiver().start()
    try:
        django_rq.get_queue("default").enqueue(maintenance_run)
        subprocess.run(
            [sys.executable, "manage.py", "rqworker", "--burst", "default"],
            cwd=REPO,
            env={**pipeline_env, **receiver.env(), "OTEL_BSP_SCHEDULE_DELAY": "60000"},  # only a flush sends
            capture_output=True,
            timeout=120,
            check=True,
        )
        spans = receiver.snapshot()
    finally:
        receiver.stop()
    assert spans and {span.service for span in spans} == {"eigenflux-worker"}
    # The job's SQL (maintenance_run prunes with DELETEs) was exported from the work horse.
    assert any(span.name.startswith("DELETE") for span in spans), sorted({s.name for s in spans})
