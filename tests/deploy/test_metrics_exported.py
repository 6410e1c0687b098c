"""Every metric a dashboard panel, an alert rule or the KEDA trigger names is really exported, with the labels
they select and group by: scraped from a running web process and a running run_pipeline process after one item
went through (histograms' and labelled counters' series exist only once something happened).

The same run checks the web process's JSON logs: the publish line carries the ids; no token is in any line."""

from __future__ import annotations

import json
import re
import secrets
from collections import defaultdict

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from items.models import ItemStatus, OutboxEvent, ProcessedItem
from tests.deploy.conftest import free_port
from tests.deploy.references import (
    SYNTHETIC_METRICS,
    Selector,
    groupings,
    parse_promql,
    promql_expressions,
    selectors_in,
)
from tests.factories import make_agent
from tests.fakes.fixtures import MAIN_KEY
from tests.pipeline.runtime.fixtures import wait_for

TARGET_LABELS = {"job", "instance"}  # added by Prometheus at scrape time
JOBS = {"eigenflux-web": "web", "eigenflux-pipeline": "pipeline"}


def scrape(url: str, token: str | None = None) -> dict[str, list[dict[str, str]]]:
    """Sample name -> the label sets of its samples."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = httpx.get(url, headers=headers, timeout=10)
    response.raise_for_status()
    samples: dict[str, list[dict[str, str]]] = defaultdict(list)
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[sample.name].append(dict(sample.labels))
    return dict(samples)


def value(url: str, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(httpx.get(url, timeout=10).text):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                return sample.value
    return None


def processes_for(selector: Selector) -> list[str]:
    operator, job = selector.matchers.get("job", ("", ""))
    if operator == "=":
        return [JOBS[job]]
    if operator == "=~":
        return [process for name, process in JOBS.items() if re.fullmatch(job, name)]
    return list(JOBS.values())


def check_selector(where: str, selector: Selector, scraped: dict[str, dict]) -> None:
    if selector.name in SYNTHETIC_METRICS:
        return
    label_sets = [labels for process in processes_for(selector) for labels in scraped[process].get(selector.name, [])]
    assert label_sets, f"{where}: no process exports {selector.name}"
    for label, (operator, wanted) in selector.matchers.items():
        if label in TARGET_LABELS:
            continue
        assert any(label in labels for labels in label_sets), f"{where}: {selector.name} has no label {label}"
        if operator == "=":
            assert any(labels.get(label) == wanted for labels in label_sets), (
                f"{where}: no {selector.name} sample has {label}={wanted!r} (seen: "
                f"{sorted({labels.get(label) for labels in label_sets}, key=str)})"
            )


@pytest.mark.slow
def test_every_metric_named_in_deploy_is_exported(web_server, run_pipeline, fake_llm):
    agent, token = make_agent()
    metrics_token = "scrape-" + secrets.token_hex(8)
    web = web_server(env={"LOG_FORMAT": "json", "METRICS_TOKEN": metrics_token, **fake_llm.env()})
    metrics_port = free_port()
    pipeline = run_pipeline(
        env={
            **fake_llm.env(),
            "LOG_FORMAT": "json",
            "PIPELINE_METRICS_PORT": str(metrics_port),
            "PIPELINE_LAG_POLL_SECONDS": "0.5",
            "PIPELINE_BLOCK_MS": "200",
        }
    )
    pipeline_url = f"http://127.0.0.1:{metrics_port}/metrics"

    # Traffic: one publish through the web process, which the pipeline enriches; a readiness probe.
    published = httpx.post(
        f"{web.url}/api/v1/items/publish",
        json={"content": "Need a second reviewer for a Rust borrow-checker patch"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert published.status_code == 202, published.text
    item_id = published.json()["item_id"]
    assert httpx.get(f"{web.url}/readyz", timeout=10).status_code == 200
    wait_for(
        lambda: ProcessedItem.objects.filter(pk=item_id, status=ItemStatus.COMPLETED).exists(),
        120,
        0.2,
        "the item to complete",
    )
    wait_for(
        lambda: (
            value(pipeline_url, "eigenflux_item_publish_to_terminal_seconds_count", status="completed")
            and value(pipeline_url, "eigenflux_stream_lag", group="cg:item:publish") is not None
        ),
        60,
        0.2,
        "the pipeline's metrics to show the item",
    )

    scraped = {"web": scrape(f"{web.url}/metrics", metrics_token), "pipeline": scrape(pipeline_url)}
    expressions = promql_expressions()
    for where, expr in expressions:
        for selector in selectors_in(parse_promql(expr)):
            check_selector(where, selector, scraped)
        for labels, under in groupings(expr):
            present = set(TARGET_LABELS)
            for selector in under:
                for process in processes_for(selector):
                    for label_set in scraped[process].get(selector.name, []):
                        present |= set(label_set)
            missing = set(labels) - present
            assert not missing, f"{where}: groups by {sorted(missing)}, which {[s.name for s in under]} lack"
    # What the alerts rely on, by value: the consumers this process runs, and the observed publish->terminal time.
    assert value(pipeline_url, "eigenflux_pipeline_running_consumers", group="cg:item:publish") == 1
    assert value(pipeline_url, "eigenflux_pipeline_dead_letters_total", error_class="transient") == 0

    pipeline.terminate()
    assert pipeline.wait(60) == 0
    web.stop()

    # The web process's logs: JSON lines, the publish line with its ids, no token.
    output = web.output()
    records = [json.loads(line) for line in output.splitlines() if line.strip()]
    envelope = OutboxEvent.objects.get(subject=item_id, event_type__endswith="published.v1").envelope
    (line,) = [r for r in records if r["message"] == f"item {item_id} published"]
    assert line["item_id"] == item_id and line["agent_id"] == str(agent.pk)
    assert line["event_id"] == envelope["id"] and line["trace_id"] == envelope["traceparent"].split("-")[1]
    assert any(r["logger"].startswith("uvicorn") for r in records)  # uvicorn's own lines are JSON too
    for secret in (token, metrics_token, MAIN_KEY):
        assert secret not in output
