"""Round trips per item: an accepted item is enriched in at most six database transactions (the claim, which
reads the exact duplicate too; three checkpoints that also extend the lease and carry their call's LLMCall rows
and decisions, each one statement; the similarity search; the completion, which carries the suggestion), counted
on the handler's own connection; plus at most one NOTIFY for the relays after the completion's commit
(OUTBOX_WAKEUP=after-commit: a statement of its own, for the outcome event)."""

from __future__ import annotations

import pytest
from django.db import connection

from items.blacklist_cache import blacklist_keywords
from items.models import ItemStatus, ProcessedItem
from items.services.agents import agent_create
from items.services.publish import item_publish
from pipeline.consumers.item_publish import ItemPublishConsumer
from pipeline.models import LLMCall
from tests.pipeline.enrichment.conftest import publish_entry

pytestmark = pytest.mark.django_db(transaction=True)


class TransactionCounter:
    """An execute wrapper: a statement outside a transaction is one; a transaction block counts once. The
    after-commit NOTIFY (items.outbox) is counted apart."""

    def __init__(self) -> None:
        self.transactions = 0
        self.statements = 0
        self.notifies = 0
        self.first_statements: list[str] = []  # the first statement of each transaction, for the failure message
        self._blocks: list[object] = []  # outermost atomic blocks seen (kept, so their ids are not reused)

    def __call__(self, execute, sql, params, many, context):
        conn = context["connection"]
        self.statements += 1
        if sql.startswith("SELECT pg_notify("):
            self.notifies += 1
        elif not conn.in_atomic_block:
            self.transactions += 1
            self.first_statements.append(sql[:80])
        else:
            outer = conn.atomic_blocks[0]
            if not any(block is outer for block in self._blocks):
                self._blocks.append(outer)
                self.transactions += 1
                self.first_statements.append(sql[:80])
        return execute(sql, params, many, context)


def test_an_accepted_item_takes_at_most_six_transactions(fake_llm):
    author = agent_create(name="tx-counter")
    raw = item_publish(author=author, content="Offering 40 spare A100 GPU hours this weekend, Frankfurt region.").item
    blacklist_keywords()  # cached in Redis after the first read: a running process does not ask PostgreSQL
    counter = TransactionCounter()
    with connection.execute_wrapper(counter):
        ItemPublishConsumer().handle(publish_entry(raw.pk))
    item = ProcessedItem.objects.get(pk=raw.pk)
    assert item.status == ItemStatus.COMPLETED
    calls = LLMCall.objects.filter(item_id=raw.pk)
    assert sorted(calls.values_list("prompt", flat=True)) == ["embedding", "process_item", "safety", "suggest_action"]
    assert all(outcome == "ok" for outcome in calls.values_list("outcome", flat=True))
    assert counter.transactions <= 6, counter.first_statements
    assert counter.notifies <= 1
    # Each checkpoint and the outcome one statement with their rows (was 29 statements with savepoints and
    # separate inserts): claim, three checkpoints, similarity, and the completion's lock, duplicate check and
    # write, plus the NOTIFY.
    assert counter.statements <= 10


def test_claim_returns_the_item_as_claimed_with_its_raw_item(fake_llm):
    from items.services.enrichment_state import Claim, item_claim

    author = agent_create(name="tx-claim")
    raw = item_publish(author=author, content="Looking for a co-founder with Rust and distributed systems.").item
    state, item = item_claim(item_id=raw.pk, token="5-5@holder", lease_seconds=60)
    assert state is Claim.CLAIMED
    assert item.status == ItemStatus.PROCESSING and item.claimed_by == "5-5@holder" and item.attempts == 1
    assert item.raw.content == raw.content and item.raw.author_id == author.pk
    assert item.embedding is None and item.pending_embedding is None and item.extraction is None
    # Held by another live entry: busy; the same entry (a reclaim) takes it over.
    assert item_claim(item_id=raw.pk, token="6-6@other", lease_seconds=60)[0] is Claim.BUSY
    state, again = item_claim(item_id=raw.pk, token="5-5@newholder", lease_seconds=60)
    assert state is Claim.CLAIMED and again.attempts == 2
    # An id with LIKE wildcards in it claims nothing it should not.
    assert item_claim(item_id=raw.pk, token="%@x", lease_seconds=60)[0] is Claim.BUSY
    assert item_claim(item_id=10**9, token="7-7@x", lease_seconds=60) == (Claim.MISSING, None)


def test_the_claim_reads_the_items_exact_duplicate_in_the_same_statement(fake_llm):
    from django.test.utils import CaptureQueriesContext

    from items.services.item_claim import item_claim_with_duplicate
    from tests.factories import make_completed_item

    text = "Selling two used RTX 4090 cards, pickup in Lyon."
    original = make_completed_item(content=text)
    raw = item_publish(author=agent_create(name="tx-dup"), content=text).item
    other = item_publish(author=agent_create(name="tx-nodup"), content="Renting a rack in Marseille.").item
    with CaptureQueriesContext(connection) as queries:
        state, item, duplicate = item_claim_with_duplicate(item_id=raw.pk, token="8-8@h", lease_seconds=60)
    assert len(queries) == 1
    assert state.value == "claimed" and item.pk == raw.pk and duplicate is not None and duplicate.pk == original.pk
    assert item_claim_with_duplicate(item_id=other.pk, token="9-9@h", lease_seconds=60)[2] is None


def test_every_statement_of_an_accepted_item_is_one_psycopg_keeps_parsed(fake_llm):
    """psycopg parses a statement's text (its placeholders) once and keeps it, unless the statement has more
    than 50 parameters or 4 KiB of text: then it parses it again on every call. The completion carried its
    decisions, call rows and event as VALUES lists (69 parameters); its rows now travel as one jsonb each."""
    from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH, MAX_CACHED_STATEMENT_PARAMS

    author = agent_create(name="tx-cacheable")
    raw = item_publish(author=author, content="Renting out two H100 nodes by the week, Amsterdam, with support.").item
    blacklist_keywords()
    seen: list[tuple[str, int]] = []

    def record(execute, sql, params, many, context):
        seen.append((sql, len(params or ())))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        ItemPublishConsumer().handle(publish_entry(raw.pk))
    assert ProcessedItem.objects.get(pk=raw.pk).status == ItemStatus.COMPLETED
    assert any(sql.startswith("WITH updated") and "outboxevent" in sql for sql, _ in seen)  # the completion
    for sql, count in seen:
        assert count <= MAX_CACHED_STATEMENT_PARAMS and len(sql.encode()) <= MAX_CACHED_STATEMENT_LENGTH, (count, sql)
