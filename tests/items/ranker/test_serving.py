"""The ranker in the feed (docs/feed-ranker.md#serving): the active model ranks a reader with history, a reader
without history keeps the formula, a model that does not check is refused with its fallback counted, a newly
activated model is picked up without a restart, and each for_me impression logs its features and propensity."""

from __future__ import annotations

import logging

import pytest
from django.test import Client
from django.utils import timezone

from eigenflux.base.embedding_space import configured_embedding_model
from items.events import STREAM_REPLAY_LOG
from items.feed_ranking import rank_entries
from items.models import FeedImpression, ItemFeedback, OutboxEvent, RankerModelStatus, ReaderProfile
from items.ranker.contract import CONTRACT, FEATURES
from items.ranker.model import ModelRefused
from items.ranker.serving import FALLBACKS, ranker_activate
from pipeline.consumers.replay_log import ReplayLogConsumer
from tests.factories import make_agent, outbox_stream_event
from tests.items.feed.conftest import basis, item, ranked, reader_with
from tests.items.ranker.factories import document, stored_model

pytestmark = pytest.mark.django_db
PREFERS_DEMAND = {"type=demand": 10.0}


@pytest.fixture
def network(settings):
    """A reader with history and one without, alike; an info item the formula prefers, a demand it does not."""
    settings.FEED_RANKER_CHECK_SECONDS = 0
    author, _ = make_agent()
    info = item(author, broadcast_type="info", embedding=basis(0))
    demand = item(author, broadcast_type="demand", embedding=basis(7))
    judged = item(author, broadcast_type="info", embedding=basis(9))
    seasoned = reader_with(seeks_vector=basis(0))
    ItemFeedback.objects.create(reader=seasoned, item=judged, score=1, event_id="e1")
    newcomer = reader_with(seeks_vector=basis(0))
    return seasoned, newcomer, info, demand


def order(reader, *items) -> list[int]:
    """The ranked order of `items` only."""
    wanted = {one.pk for one in items}
    return [pk for pk in ranked(reader) if pk in wanted]


def test_the_active_model_ranks_a_reader_with_history_and_the_formula_a_new_one(network):
    seasoned, newcomer, info, demand = network
    assert order(seasoned, info, demand) == [info.pk, demand.pk]  # no model: the formula
    model = stored_model(document(PREFERS_DEMAND))
    assert order(seasoned, info, demand) == [demand.pk, info.pk] and ranked(seasoned)[0] == demand.pk
    entry = rank_entries(reader=seasoned, page_size=10, depth=10)[0]
    assert entry.ranker == f"relevance-2+ranker-{model.pk}" and entry.total == pytest.approx(10.0)
    assert order(newcomer, info, demand) == [info.pk, demand.pk]  # cold start: the formula


def test_the_model_ranks_newcomers_only_when_told_to(network, settings):
    _, newcomer, info, demand = network
    stored_model(document(PREFERS_DEMAND))
    assert order(newcomer, info, demand) == [info.pk, demand.pk]  # the formula
    settings.FEED_RANKER_FOR_NEWCOMERS = True
    assert order(newcomer, info, demand) == [demand.pk, info.pk]
    assert all(entry.ranker for entry in rank_entries(reader=newcomer, page_size=10, depth=10))


def test_a_readers_own_type_preference_reaches_the_model(network):
    # A model that reads only the reader's type preference (own_type_up): the reader's +2 on a demand puts the
    # other demand above the info item the formula prefers; the reader whose one +1 was on an info item keeps it.
    seasoned, _, info, demand = network
    stored_model(document({"own_type_up": 10.0}))
    assert order(seasoned, info, demand) == [info.pk, demand.pk]
    fan = reader_with(seeks_vector=basis(0))
    ItemFeedback.objects.create(
        reader=fan, item=item(make_agent()[0], broadcast_type="demand", embedding=basis(11)), score=2, event_id="e3"
    )
    assert order(fan, info, demand) == [demand.pk, info.pk]
    (first,) = [entry for entry in rank_entries(reader=fan, page_size=10, depth=10) if entry.facts.item_id == demand.pk]
    up = first.features[FEATURES.index("own_type_up")]
    assert up == pytest.approx((1 + 1.0) / (5 + 1.0))  # the +2 (weight 1) over five buckets' prior


def test_the_model_re_ranks_only_the_formulas_best(network, settings):
    seasoned, _, info, demand = network
    stored_model(document(PREFERS_DEMAND))
    settings.FEED_RANKER_DEPTH = 1  # the formula's best alone: the demand, below it, stays below
    assert order(seasoned, info, demand) == [info.pk, demand.pk]
    entries = rank_entries(reader=seasoned, page_size=10, depth=10)
    assert all(entry.ranker for entry in entries) and entries[0].total > entries[1].total
    settings.FEED_RANKER_DEPTH = 50
    assert order(seasoned, info, demand) == [demand.pk, info.pk]


def test_the_switch_turns_the_model_off_without_a_database_write(network, settings):
    seasoned, _, info, demand = network
    stored_model(document(PREFERS_DEMAND))
    settings.FEED_RANKER_ENABLED = False
    assert order(seasoned, info, demand) == [info.pk, demand.pk]
    settings.FEED_RANKER_ENABLED = True
    assert order(seasoned, info, demand) == [demand.pk, info.pk]


def _fallbacks(reason: str) -> float:
    return FALLBACKS.labels(reason=reason)._value.get()


@pytest.mark.parametrize(
    ("breakage", "reason"),
    [
        (lambda doc: doc["self_tests"][1].update(logit=99.0), "self_test"),
        (lambda doc: doc.update(contract="ranker_features_v9"), "contract"),
    ],
)
def test_a_model_that_does_not_check_is_refused_and_the_fallback_counted(network, caplog, breakage, reason):
    seasoned, _, info, demand = network
    doc = document(PREFERS_DEMAND)
    breakage(doc)
    model = stored_model(doc)
    before = _fallbacks(reason)
    with caplog.at_level(logging.ERROR, logger="items.ranker.serving"):
        assert order(seasoned, info, demand) == [info.pk, demand.pk]
        assert order(seasoned, info, demand) == [info.pk, demand.pk]
    assert _fallbacks(reason) == before + 2  # every ranking that fell back
    assert f"ranker model {model.pk} refused ({reason})" in caplog.text


def test_a_newly_activated_model_is_picked_up_without_a_restart(network, settings):
    seasoned, _, info, demand = network
    stored_model(document(PREFERS_DEMAND))
    assert order(seasoned, info, demand) == [demand.pk, info.pk]
    rollback = stored_model(document({"type=info": 10.0}), status=RankerModelStatus.RETIRED)
    settings.FEED_RANKER_CHECK_SECONDS = 3600
    ranker_activate(model=rollback, actor="test")
    assert order(seasoned, info, demand) == [demand.pk, info.pk]  # asked again after FEED_RANKER_CHECK_SECONDS
    settings.FEED_RANKER_CHECK_SECONDS = 0
    assert order(seasoned, info, demand) == [info.pk, demand.pk]


def test_activation_refuses_a_gate_refused_or_broken_model(network):
    refused = stored_model(document(PREFERS_DEMAND), status=RankerModelStatus.REFUSED)
    broken = document(PREFERS_DEMAND)
    broken["weights"][0] = 5.0  # its self-tests no longer hold
    broken = stored_model(broken, status=RankerModelStatus.STORED)
    for model in (refused, broken):
        with pytest.raises(ModelRefused):
            ranker_activate(model=model, actor="test")
    assert not type(refused).objects.filter(status=RankerModelStatus.ACTIVE).exists()


def test_a_for_me_page_logs_each_items_features_and_propensity(network, settings):
    settings.FEED_EXPLORATION_POOL = 3
    _, _, info, _ = network
    reader, token = make_agent()
    ReaderProfile.objects.create(
        agent=reader, seeks_embedding=basis(0), embedding_model=configured_embedding_model(), version=timezone.now()
    )
    ItemFeedback.objects.create(reader=reader, item=info, score=1, event_id="e2")
    for n in range(6):  # fresh, decent, unjudged: explorable (each of its own author: the caps allow them)
        item(make_agent()[0], broadcast_type="supply", embedding=basis(20 + n), quality=0.8)
    model = stored_model(document(PREFERS_DEMAND))
    body = Client(HTTP_AUTHORIZATION=f"Bearer {token}").get("/api/v1/feed?for_me=1&limit=5").json()
    assert len(body["items"]) == 5
    (event,) = OutboxEvent.objects.filter(stream=STREAM_REPLAY_LOG)
    ReplayLogConsumer().handle(outbox_stream_event(event, group=ReplayLogConsumer.group))
    rows = list(FeedImpression.objects.order_by("position"))
    assert [row.item_id for row in rows] == [int(served["item_id"]) for served in body["items"]]
    assert {row.contract for row in rows} == {CONTRACT} and all(len(row.features) == len(FEATURES) for row in rows)
    # One exploration slot, drawn from a pool of three.
    assert sorted(row.propensity for row in rows) == [pytest.approx(1 / 3, abs=1e-6), 1, 1, 1, 1]
    assert {row.ranking_version for row in rows} == {f"relevance-2+ranker-{model.pk}"}


def test_a_client_refresh_logs_features_and_its_load_more_does_not(network):
    _, _, info, _ = network
    reader, token = make_agent()
    ItemFeedback.objects.create(reader=reader, item=info, score=1, event_id="e3")
    for n in range(4):
        item(make_agent()[0], embedding=basis(30 + n))
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert len(client.get("/eigenflux/api/v1/items/feed?action=refresh&limit=2").json()["data"]["items"]) == 2
    assert client.get("/eigenflux/api/v1/items/feed?action=load_more&limit=2").json()["data"]["items"]
    for event in OutboxEvent.objects.filter(stream=STREAM_REPLAY_LOG).order_by("pk"):
        ReplayLogConsumer().handle(outbox_stream_event(event, group=ReplayLogConsumer.group))
    rows = list(FeedImpression.objects.order_by("position"))
    assert [row.position for row in rows] == [1, 2, 3, 4]
    assert [row.contract for row in rows] == [CONTRACT, CONTRACT, "", ""]  # load_more: ids from the cache only
    assert rows[0].score is not None and rows[2].features is None
