"""One item's trace, printed as a span tree with timings: what docs/operations.md, "Traces", shows.

Publishes one broadcast through the HTTP API in this process (tracing set up as the web process does), then runs
`manage.py run_pipeline --burst` with the enrichment, official-agent, audit and notify consumers against the
fake OpenAI-compatible server of tests/fakes; both export over OTLP/HTTP to a receiver in this script, which
prints the item's spans (start offset from the request, duration). A scratch database and Redis db 9 on the
embedded (or DATABASE_URL / REDIS_URL) servers; nothing leaves 127.0.0.1.

Run: .venv/bin/python bench/trace_one_item.py [--all]   (--all: also the SQL and Redis command spans)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.scratch import scratch_environment  # noqa: E402
from tests.fakes.fixtures import FakeLLM  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402
from tests.fakes.otlp_receiver import OTLPReceiver, PlainSpan  # noqa: E402

CONSUMERS = ("item-publish", "official-firstbroadcast", "audit", "item-notify")
MODULES = ("item_publish", "official_firstbroadcast", "audit", "item_notify")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--all", action="store_true", help="also the SQL and Redis command spans")
    show_all = parser.parse_args().all
    receiver = OTLPReceiver().start()
    fake = FakeLLM(FakeOpenAIServer().start())
    # The web side of this script exports like a web process would; setup happens in eigenflux.wsgi.
    os.environ.update({**receiver.env(), **fake.env()})
    env = scratch_environment("eigenflux_trace_one", 9)
    from django.test import Client

    from eigenflux.base import tracing
    from eigenflux.base.redis import get_redis
    from tests.factories import make_agent

    get_redis().flushdb()
    tracing.setup("web")
    _, token = make_agent()
    response = Client(HTTP_AUTHORIZATION=f"Bearer {token}").post(
        "/api/v1/items/publish",
        data=json.dumps({"content": "Offering 40 spare H100 GPU hours this weekend for inference jobs"}),
        content_type="application/json",
    )
    assert response.status_code == 202, response.content
    tracing.flush()
    args = [sys.executable, "manage.py", "run_pipeline", "--burst"]
    for name in CONSUMERS:
        args += ["--consumer", name]
    env["PIPELINE_EXTRA_CONSUMER_MODULES"] = ",".join(f"pipeline.consumers.{m}" for m in MODULES)
    subprocess.run(args, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    spans = receiver.snapshot()
    root = next(s for s in spans if s.kind == "SERVER" and "publish" in s.name)
    print_tree([s for s in spans if s.trace_id == root.trace_id], root, show_all)
    fake.server.stop()
    receiver.stop()


def print_tree(spans: list[PlainSpan], root: PlainSpan, show_all: bool) -> None:
    children: dict[str, list[PlainSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_ns):
        children.setdefault(span.parent_span_id, []).append(span)
    print(f"trace {root.trace_id}: {len(spans)} spans")
    print(f"{'start ms':>9} {'took ms':>8}  span [service] attributes")

    def walk(span: PlainSpan, depth: int) -> None:
        infrastructure = span.kind == "CLIENT" and "gen_ai.operation.name" not in span.attributes
        if show_all or not infrastructure:
            print(
                f"{(span.start_ns - root.start_ns) / 1e6:9.1f} {span.duration_ms:8.1f}  "
                f"{'  ' * depth}{span.name} [{span.service}]{describe(span)}"
            )
        for child in children.get(span.span_id, []):
            walk(child, depth + 1)

    walk(root, 0)


def describe(span: PlainSpan) -> str:
    a = span.attributes
    parts = []
    if "messaging.consumer.group.name" in a:
        parts.append(
            f"group={a['messaging.consumer.group.name']} delivery={a.get('messaging.redis.message.delivery_count')}"
        )
    if "gen_ai.operation.name" in a:
        parts.append(
            f"prompt={a.get('eigenflux.prompt.name')} tokens={a.get('gen_ai.usage.input_tokens')}/"
            f"{a.get('gen_ai.usage.output_tokens')} {a.get('eigenflux.model_call.outcome')}"
        )
    if "http.route" in a:
        parts.append(f"status={a.get('http.response.status_code', a.get('http.status_code'))}")
    return f"  {' '.join(parts)}" if parts else ""


if __name__ == "__main__":
    main()
