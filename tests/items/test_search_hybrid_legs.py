"""Hybrid search runs its semantic leg beside the keyword leg, on a second connection, when that is safe.

These tests commit their rows (transactional_db): a second connection cannot see a test transaction's rows,
which is exactly why, inside a transaction, the legs run one after the other (the last tests)."""

import threading
import time

import pytest
from django.db import connection, connections
from django.test import Client
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from prometheus_client import REGISTRY

from items import search
from items.search import SemanticSearchUnavailable, both_legs, embed_query, search_items
from tests.factories import make_agent, make_completed_item
from tests.pipeline.enrichment.conftest import at_cosine, unit


def legs_count(run: str) -> float:
    return REGISTRY.get_sample_value("eigenflux_search_hybrid_legs_total", {"run": run}) or 0.0


def embedding_thread(seen: list[str], wrappers: list | None = None, traces: list | None = None):
    """An embedder that notes which thread ran the semantic leg (and its connection wrapper and trace id)."""

    def embed(text: str):
        seen.append(threading.current_thread().name)
        if wrappers is not None:
            wrappers.append(connections["default"])
        if traces is not None:
            traces.append(trace.get_current_span().get_span_context().trace_id)
        return embed_query(text)

    return embed


def hybrid(q: str, embed):
    return search_items(q=q, mode="hybrid", broadcast_type=None, domain=None, offset=0, limit=20, embed=embed)


@pytest.fixture
def kubernetes_items():
    author, token = make_agent()
    both = make_completed_item(author, "Kubernetes cluster rental", embedding=unit(1.0))
    keyword_only = make_completed_item(author, "Kubernetes operators wanted", embedding=unit(0.0, 1.0))
    semantic_only = make_completed_item(author, "Container platform hosting", embedding=at_cosine(0.95))
    return token, both, keyword_only, semantic_only


@pytest.mark.django_db(transaction=True)
def test_the_semantic_leg_runs_on_its_own_thread_and_connection(fake_llm, kubernetes_items, settings):
    settings.SEARCH_PARALLEL_LEGS = 1  # one pool thread: the check below looks at the one that ran the leg
    _, both, keyword_only, semantic_only = kubernetes_items
    fake_llm.set_embedding("kubernetes", unit(1.0))
    seen: list[str] = []
    wrappers: list = []
    traces: list[int] = []
    before = legs_count("side_by_side")
    request_span = SpanContext(trace_id=0xE16E, span_id=0xF1, is_remote=False, trace_flags=TraceFlags(1))
    token = otel_context.attach(trace.set_span_in_context(NonRecordingSpan(request_span)))
    try:
        page = hybrid("kubernetes", embedding_thread(seen, wrappers, traces))
    finally:
        otel_context.detach(token)

    assert seen and seen[0].startswith("search-leg") and seen[0] != threading.current_thread().name
    assert wrappers[0] is not connections["default"]  # its own connection, not this thread's
    assert traces == [0xE16E]  # in the request's trace
    assert legs_count("side_by_side") == before + 1
    assert page.hits[0].item.pk == both.pk and page.hits[0].matched == ["keyword", "semantic"]
    assert {hit.item.pk for hit in page.hits} == {both.pk, keyword_only.pk, semantic_only.pk}
    # The pool thread gave its connection back once the leg was done (to the pool: the tests run pooled).
    legs = search._second_legs_pool()
    assert legs.executor.submit(lambda: connections["default"] is wrappers[0]).result(timeout=5)
    assert wrappers[0].connection is None


@pytest.mark.django_db(transaction=True)
def test_hybrid_through_the_api_is_the_same_side_by_side(fake_llm, kubernetes_items, settings):
    token, both, keyword_only, semantic_only = kubernetes_items
    fake_llm.set_embedding("kubernetes", unit(1.0))
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    settings.SEARCH_PARALLEL_LEGS = 0
    apart = legs_count("side_by_side")
    sequential = client.get("/api/v1/search?q=kubernetes&mode=hybrid")
    assert legs_count("side_by_side") == apart
    settings.SEARCH_PARALLEL_LEGS = 4
    side_by_side = client.get("/api/v1/search?q=kubernetes&mode=hybrid")
    assert legs_count("side_by_side") == apart + 1
    assert side_by_side.status_code == sequential.status_code == 200
    assert side_by_side.json()["items"] == sequential.json()["items"]
    found = [int(item["item_id"]) for item in side_by_side.json()["items"]]
    assert found[0] == both.pk and set(found) == {both.pk, keyword_only.pk, semantic_only.pk}


@pytest.mark.django_db(transaction=True)
def test_a_failing_semantic_leg_fails_the_search_and_frees_its_slot(fake_llm, kubernetes_items, settings):
    settings.SEARCH_PARALLEL_LEGS = 1

    def unavailable(text: str):
        raise SemanticSearchUnavailable("model down")

    with pytest.raises(SemanticSearchUnavailable, match="model down"):
        hybrid("kubernetes", unavailable)
    fake_llm.set_embedding("kubernetes", unit(1.0))
    seen: list[str] = []
    hybrid("kubernetes", embedding_thread(seen))  # the one slot is free again
    assert seen[0].startswith("search-leg")


@pytest.mark.django_db(transaction=True)
def test_a_failing_first_leg_waits_for_the_second_before_raising(settings):
    settings.SEARCH_PARALLEL_LEGS = 2
    finished = threading.Event()

    def slow_second():
        time.sleep(0.3)
        finished.set()
        return "second"

    def failing_first():
        raise ValueError("keyword leg broke")

    with pytest.raises(ValueError, match="keyword leg broke"):
        both_legs(failing_first, slow_second)
    assert finished.is_set()


@pytest.mark.django_db(transaction=True)
def test_the_legs_run_one_after_the_other_when_the_pool_has_no_spare_connection(fake_llm, kubernetes_items):
    pool = connections["default"].pool
    assert pool is not None, "the tests run with the connection pool, as production does"
    fake_llm.set_embedding("kubernetes", unit(1.0))
    connection.ensure_connection()  # this thread's own connection, as a request holds one
    borrowed = []
    try:
        while pool.get_stats().get("pool_available", 0) > 0 or pool.get_stats()["pool_size"] < pool.max_size:
            borrowed.append(pool.getconn(timeout=5))
        seen: list[str] = []
        before = legs_count("one_after_other")
        page = hybrid("kubernetes", embedding_thread(seen))
    finally:
        for conn in borrowed:
            pool.putconn(conn)
    assert seen == [threading.current_thread().name]
    assert legs_count("one_after_other") == before + 1
    assert page.hits and page.hits[0].matched == ["keyword", "semantic"]


@pytest.mark.django_db
def test_inside_a_transaction_the_legs_run_one_after_the_other(fake_llm, kubernetes_items):
    _, both, _, _ = kubernetes_items
    fake_llm.set_embedding("kubernetes", unit(1.0))
    seen: list[str] = []
    before = legs_count("one_after_other")

    page = hybrid("kubernetes", embedding_thread(seen))  # a second connection would not see these rows

    assert seen == [threading.current_thread().name]
    assert legs_count("one_after_other") == before + 1
    assert page.hits[0].item.pk == both.pk
