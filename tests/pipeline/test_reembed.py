"""Vectors know their model (ProcessedItem/ReaderProfile `embedding_model`): every write stamps it, similarity
compares only the configured model's, the start-up check reports the others, and `manage.py reembed_items`
rewrites them, resumably, in one process or several (docs/operations.md#changing-the-embedding-model)."""

import io

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction
from django.utils import timezone

from eigenflux.base.embedding_space import configured_embedding_model
from eigenflux.base.sqlrows import BinaryVector, server_bound_cursor
from items import selectors
from items.models import ProcessedItem, ReaderProfile
from items.search import semantic_candidates
from items.selectors import most_similar
from items.services.match_push import nearest_profiles
from pipeline import reembed as reembed_module
from pipeline.checks import check_embedding_provenance
from pipeline.llm.local import hashing
from pipeline.llm.local.embedding import embed_texts
from tests.factories import make_agent, make_completed_item, make_item
from tests.fakes.openai_server import Fault, hashed_embedding
from tests.pipeline.enrichment.test_pending_embedding import run_once

OLD = "local:hashing:384"  # the model the stored vectors below pretend to come from
FAKE = "openai:fake-embedding:384"  # the fake server's embedding, as configured by the fake_llm fixture


def unit(*components: float) -> list[float]:
    vector = np.zeros(384)
    vector[: len(components)] = components
    return (vector / np.linalg.norm(vector)).tolist()


def old_items(count: int) -> list[ProcessedItem]:
    texts = [f"Broadcast {n}: spare GPU hours in region {n}, ask for rates." for n in range(count)]
    return [make_completed_item(content=t, embedding=hashing.embed_text(t, 384), embedding_model=OLD) for t in texts]


def embedded_texts(fake_llm) -> list[str]:
    """Every text the fake server embedded and answered (a failed request embedded nothing)."""
    texts: list[str] = []
    for request in fake_llm.requests_for("embed"):
        if request.status == 200:
            sent = request.json["input"]
            texts += [sent] if isinstance(sent, str) else sent
    return texts


def reembed(*args: str) -> str:
    err = io.StringIO()
    call_command("reembed_items", *args, "--progress-seconds", "0", stdout=io.StringIO(), stderr=err)
    return err.getvalue()


# -- provenance on every write ---------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_enrichment_stamps_its_vector_with_the_configured_model(fake_llm):
    item = run_once(make_item(content="Offering two spare A100 GPUs in Frankfurt this weekend.").pk)
    assert item.embedding is not None and item.embedding_model == FAKE


@pytest.mark.django_db(transaction=True)
def test_the_enrichment_embeds_again_a_checkpoint_another_model_made(fake_llm):
    raw = make_item(content="Renting out a quiet desk in Shanghai, Jing'an district.")
    ProcessedItem.objects.filter(pk=raw.pk).update(pending_embedding=unit(1.0), embedding_model=OLD)
    item = run_once(raw.pk)
    assert fake_llm.count("embed") == 1  # the old model's checkpoint was not reused
    assert item.embedding_model == FAKE
    assert np.allclose(np.asarray(item.embedding), hashed_embedding(raw.content, 384), atol=1e-5)


@pytest.mark.django_db
def test_reembed_items_replaces_old_vectors_with_the_configured_model(settings):
    settings.LLM_PROVIDER = "local"
    settings.LOCAL_EMBEDDING = "minilm"
    texts = ["Offering spare A100 GPUs in Frankfurt.", "上海静安区共享办公工位出租。"]
    items = [make_completed_item(content=t, embedding=hashing.embed_text(t, 384), embedding_model=OLD) for t in texts]
    pending = make_completed_item(content="no vector yet")  # nothing to replace: left alone
    # A discarded item's embedding checkpoint (unindexed, kept for a requeue) moves into the new space too.
    checkpoint = make_completed_item(content=texts[0], status="discarded")
    ProcessedItem.objects.filter(pk=checkpoint.pk).update(
        pending_embedding=hashing.embed_text(texts[0], 384), embedding_model=OLD
    )
    reembed("--batch", "1")
    expected = embed_texts(texts, 384)
    for entry, vector in zip(items, expected, strict=True):
        stored = ProcessedItem.objects.get(pk=entry.pk)
        assert np.allclose(np.asarray(stored.embedding), vector, atol=1e-6)
        assert stored.embedding_model == "local:minilm:384"
        assert entry.group_id == stored.group_id
    assert ProcessedItem.objects.get(pk=pending.pk).embedding is None
    assert ProcessedItem.objects.get(pk=pending.pk).embedding_model == ""
    moved = ProcessedItem.objects.get(pk=checkpoint.pk)
    assert moved.embedding is None and np.allclose(np.asarray(moved.pending_embedding), expected[0], atol=1e-6)
    assert moved.embedding_model == "local:minilm:384"


@pytest.mark.django_db
def test_reembed_items_moves_reader_profiles_too(fake_llm):
    agent, _ = make_agent()
    agent.seeks, agent.offers = "GPU hours by the hour, and a startup lawyer for contracts", "Rust development"
    agent.save(update_fields=["seeks", "offers"])
    ReaderProfile.objects.create(
        agent=agent,
        seeks_embedding=unit(1.0),
        offers_embedding=unit(0, 1.0),
        embedding_model=OLD,
        version=timezone.now(),
    )
    reembed()
    profile = ReaderProfile.objects.get(agent=agent)
    assert profile.embedding_model == FAKE
    assert np.allclose(np.asarray(profile.seeks_embedding), hashed_embedding(agent.seeks, 384), atol=1e-5)
    assert len(profile.seeks_parts) == 2  # the clauses, embedded again with the sides


# -- refusing to mix ---------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_check_names_the_vectors_of_another_model_until_they_are_reembedded(fake_llm):
    old_items(3)
    make_completed_item(content="already new", embedding=unit(1.0))  # stamped with the configured model
    assert check_embedding_provenance(databases=None) == []  # `manage.py check` without --database: no query
    (warning,) = check_embedding_provenance(databases=["default"])
    assert warning.id == "eigenflux.W004"
    assert f"3 items ({OLD}: 3)" in warning.msg and FAKE in warning.msg
    assert "manage.py reembed_items" in warning.hint
    reembed()
    assert check_embedding_provenance(databases=["default"]) == []


@pytest.mark.django_db
def test_similarity_never_compares_vectors_of_two_models(fake_llm, settings):
    query = unit(1.0)
    # The other model's item holds the query's very vector; the configured model's is near it, not on it.
    other = make_completed_item(content="another model's vector", embedding=query, embedding_model=OLD)
    mine = make_completed_item(content="the configured model's vector", embedding=unit(1.0, 0.2))
    assert most_similar(embedding=query, exclude_id=-1).item_id == mine.pk
    found = [
        pk
        for pk, _ in semantic_candidates(
            embedding=query, min_similarity=-1.0, broadcast_type=None, domain=None, depth=10
        )
    ]
    assert found == [mine.pk]
    assert other.pk not in found

    near, _ = make_agent()
    far, _ = make_agent()
    ReaderProfile.objects.create(agent=near, seeks_embedding=query, embedding_model=OLD, version=timezone.now())
    ReaderProfile.objects.create(
        agent=far, seeks_embedding=unit(1.0, 0.5), embedding_model=FAKE, version=timezone.now()
    )
    supply = make_completed_item(content="GPU hours for sale", embedding=query, broadcast_type="supply")
    assert [agent_id for agent_id, _ in nearest_profiles(item=supply)] == [far.pk]  # read against the seeks
    supply.embedding_model = OLD  # an item of another model is nobody's match yet
    assert nearest_profiles(item=supply) == []


@pytest.mark.django_db
def test_the_provenance_filter_keeps_the_hnsw_index_serving(fake_llm):
    """The grouping's nearest-item read (items.selectors.most_similar) checks the model on the rows the HNSW walk
    yields: the plan is still the index scan. On a table this small the planner would sort the filtered rows; on a
    large network it walks the HNSW index: no sorting leaves it only the index (as
    tests/items/test_search_relevance.py does), which it can still use with the filter."""
    old_items(2)
    vector = unit(1.0)
    most_similar(embedding=vector, exclude_id=0)  # builds the statement
    with transaction.atomic(), server_bound_cursor() as cursor:
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(f"EXPLAIN {selectors._SIMILAR_SQL}", [BinaryVector(vector), 0, FAKE, BinaryVector(vector)])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Index Scan using processed_embedding_hnsw" in plan, plan
    assert "embedding_model" in plan, plan  # a filter on the index scan's rows


# -- reembed_items: resumable, parallel ------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_failed_reembed_resumes_where_it_stopped_and_embeds_nothing_twice(fake_llm):
    items = old_items(6)
    # The first batch is answered, then the model fails (every retry too).
    fake_llm.script("embed", {}, *[Fault.server_error() for _ in range(10)])
    with pytest.raises(CommandError) as failure:
        reembed("--batch", "2")
    assert "after 2 of 6 items" in str(failure.value) and "rerun" in str(failure.value)
    first = embedded_texts(fake_llm)
    assert len(first) == 2
    assert ProcessedItem.objects.filter(embedding_model=FAKE).count() == 2  # the committed batch stays done

    fake_llm.reset()
    output = reembed("--batch", "2")
    second = embedded_texts(fake_llm)
    assert len(second) == 4 and not set(first) & set(second)
    assert "4 items to re-embed" in output and "ETA" in output and "items/s" in output
    assert set(
        ProcessedItem.objects.filter(pk__in=[i.pk for i in items]).values_list("embedding_model", flat=True)
    ) == {FAKE}

    fake_llm.reset()
    reembed("--batch", "2")  # finished: nothing to do, no model call
    assert fake_llm.count("embed") == 0


@pytest.mark.slow  # forks two worker processes
@pytest.mark.django_db(transaction=True)
def test_two_processes_reembed_everything_exactly_once(fake_llm):
    items = old_items(10)
    output = reembed("--batch", "2", "--processes", "2")
    texts = embedded_texts(fake_llm)
    assert sorted(texts) == sorted(i.raw.content for i in items)  # each once, none twice
    for entry in ProcessedItem.objects.filter(pk__in=[i.pk for i in items]).select_related("raw"):
        assert entry.embedding_model == FAKE
        assert np.allclose(np.asarray(entry.embedding), hashed_embedding(entry.raw.content, 384), atol=1e-5)
    assert "process 1: 5 items" in output and "process 2: 5 items" in output
    assert "ms CPU/item" in output
    assert configured_embedding_model() == FAKE


@pytest.mark.django_db
def test_ctrl_c_leaves_every_committed_batch_done(fake_llm, monkeypatch):
    old_items(6)
    real_embed, calls = reembed_module.llm.embed, []

    def embed_then_interrupt(texts, **kwargs):
        calls.append(texts)
        if len(calls) == 2:
            raise KeyboardInterrupt  # Ctrl-C while the second batch is with the model
        return real_embed(texts, **kwargs)

    monkeypatch.setattr(reembed_module.llm, "embed", embed_then_interrupt)
    with pytest.raises(CommandError, match="interrupted after 2 of 6 items; rerun"):
        reembed("--batch", "2")
    assert ProcessedItem.objects.filter(embedding_model=FAKE).count() == 2
    monkeypatch.undo()
    reembed("--batch", "2")
    assert ProcessedItem.objects.filter(embedding_model=FAKE).count() == 6
    assert len(embedded_texts(fake_llm)) == 6  # the interrupted batch was never answered; nothing twice
