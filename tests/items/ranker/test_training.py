"""Training the ranker (docs/feed-ranker.md#labels, #training): labels from the logged impressions and the
readers' answers, a split by day, and the gate: a model that beats or matches what serves on the held-out days
becomes active; a worse one is stored as refused, with the reason printed."""

from __future__ import annotations

import io
import uuid
from datetime import timedelta

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from items.models import FeedEvent, ItemFeedback, RankerModel, RankerModelStatus
from items.ranker.contract import FEATURES
from items.ranker.dataset import TrainingSet, label, training_set
from items.ranker.model import model_load
from items.ranker.training import formula_prior
from tests.factories import make_agent, make_completed_item
from tests.items.ranker.factories import document, logged, stored_model, vector

pytestmark = pytest.mark.django_db


def test_labels_positives_negatives_and_what_is_ignored():
    def of(score=None, acted=False, skipped=False, skips=0, before=False):
        return label(score=score, acted=acted, skipped=skipped, skips=skips, min_skips=1, answered_before=before)

    assert of(score=2) == 1 and of(score=1) == 1 and of(acted=True) == 1  # a follow-up
    assert of(score=-1, acted=True) == 0  # a -1 outweighs having looked
    assert of(skipped=True, skips=1) == 0  # read past: an item below it answered
    assert of() is None  # perhaps never looked at
    assert of(score=0) is None
    assert of(skipped=True, skips=1, before=True) is None  # answered before it was served again: not a skip
    assert label(score=None, acted=False, skipped=True, skips=1, min_skips=2) is None


def test_the_training_set_joins_answers_to_the_impression_they_answer():
    author, _ = make_agent()
    items = [make_completed_item(author, f"Offering GPU hours, batch {n}.") for n in range(5)]
    reader, _ = make_agent()
    day, page = timezone.now() - timedelta(days=1), uuid.uuid4()
    for position, item in enumerate([items[3], items[0], items[1], items[2], items[4]], 1):
        logged(reader.pk, item.pk, day, vector(match=item.pk % 2), page_id=page, position=position)
    ItemFeedback.objects.create(reader=reader, item=items[0], score=2, event_id="a")
    ItemFeedback.objects.create(reader=reader, item=items[1], score=0, event_id="b")  # ignored
    FeedEvent.objects.create(agent=reader, item_id=items[2].pk, kind="task", dedup_key="c")
    logged(reader.pk, items[0].pk, timezone.now() + timedelta(minutes=1), vector())  # served again once answered
    data = training_set(since=day - timedelta(hours=1), skips=1)
    # item 3 (read past), item 0 (+2), item 2 (a follow-up); ignored: item 1's 0, item 4 below the last answer,
    # item 0 served again
    assert data.labels.tolist() == [0, 1, 1]
    assert data.ignored == 3 and data.features.shape == (3, len(FEATURES))
    assert not len(training_set(since=day - timedelta(hours=1), skips=1, excluded_readers=frozenset({reader.pk})))


def _history(days: int = 3, per_day: int = 6, *, tastes_change: bool = False):
    """Readers answering what they were served over `days` days: a demand is followed up, an info scored -1
    (the other way round on the last day when their tastes change); the formula's signals say nothing either
    way (drawn alike for both)."""
    author, _ = make_agent()
    demand = [make_completed_item(author, f"Need GPU hours {n}.") for n in range(3)]
    info = [make_completed_item(author, f"News of GPUs {n}.") for n in range(3)]
    rng = np.random.default_rng(1)
    for day in range(days):
        at = timezone.now() - timedelta(days=days - day, hours=1)
        for _ in range(per_day):
            reader, _ = make_agent()
            page = uuid.uuid4()
            for position, item in enumerate([*demand, *info], 1):
                is_demand = item in demand
                features = vector(match=rng.uniform(), quality=rng.uniform(), type_demand=is_demand)
                features[FEATURES.index("type=info")] = float(not is_demand)
                logged(reader.pk, item.pk, at, features, position=position, page_id=page)
                if is_demand != (tastes_change and day == days - 1):
                    FeedEvent.objects.create(agent=reader, item_id=item.pk, kind="question", dedup_key=str(item.pk))
                else:
                    ItemFeedback.objects.create(reader=reader, item=item, score=-1, event_id=f"{reader.pk}{item.pk}")


def test_a_model_better_than_the_formula_on_the_held_out_day_becomes_active():
    _history()
    out = io.StringIO()
    call_command("train_ranker", "--days", "5", stdout=out)
    model = RankerModel.objects.get()
    assert model.status == RankerModelStatus.ACTIVE, out.getvalue()
    assert f"model {model.pk} is active" in out.getvalue() and "formula" in out.getvalue()
    assert model.metrics["held_out"]["auc"] == 1.0 and model.metrics["baseline"]["auc"] < 0.8
    provenance = model.document["provenance"]
    assert provenance["train"]["rows"] == 72 and provenance["held_out"]["rows"] == 36
    assert provenance["train"]["days"][0] < provenance["held_out"]["days"][0]  # earlier days train
    assert len(provenance["data_hash"]) == 16 and provenance["code_version"]
    model_load(model.document)  # its own self-tests pass


def test_the_prior_is_the_formula_scaled_to_how_well_it_predicts(settings):
    """formula_prior: the formula's weights on its signals (0 on the contract's other features), times the slope of
    a logistic regression of the labels on the formula's score; 0 when the formula predicts nothing."""
    rng = np.random.default_rng(5)
    features = np.zeros((300, len(FEATURES)))
    features[:, FEATURES.index("match")] = rng.uniform(size=300)
    labels = (features[:, FEATURES.index("match")] + 0.2 * rng.normal(size=300) > 0.5).astype(float)
    data = TrainingSet(
        features=features,
        labels=labels,
        pages=np.array(["p"] * 300, dtype=object),
        propensities=np.ones(300),
        days=np.array(["2026-12-01"] * 300, dtype="datetime64[D]"),
        readers=np.zeros(300, dtype=np.int64),
        ignored=0,
    )
    prior, scale = formula_prior(data, l2=1.0)
    assert scale > 0.5
    assert prior[FEATURES.index("match")] == pytest.approx(scale * settings.FEED_WEIGHT_MATCH)
    assert prior[FEATURES.index("quality")] == pytest.approx(scale * settings.FEED_WEIGHT_QUALITY)
    assert prior[FEATURES.index("type=demand")] == prior[FEATURES.index("own_type_up")] == 0.0
    shuffled = data.subset(np.ones(300, dtype=bool))
    rng.shuffle(shuffled.labels)  # the same labels, unrelated to the formula's score
    assert formula_prior(shuffled, l2=1.0)[1] < scale / 5


def test_a_trained_model_records_the_formula_it_started_from(settings):
    settings.FEED_WEIGHT_QUALITY = 2.5
    _history()
    call_command("train_ranker", "--days", "5", stdout=io.StringIO())
    provenance = RankerModel.objects.get().document["provenance"]
    assert provenance["formula_weights"]["quality"] == 2.5
    assert provenance["formula_weights"]["match"] == settings.FEED_WEIGHT_MATCH
    assert isinstance(provenance["formula_scale"], float)


def test_a_worse_model_is_stored_but_refused_with_the_reason_printed():
    _history(tastes_change=True)  # the held-out day prefers info, which the active model knows
    better = stored_model(document({"type=demand": -3.0, "type=info": 3.0}))
    out = io.StringIO()
    call_command("train_ranker", "--days", "5", stdout=out)
    new = RankerModel.objects.exclude(pk=better.pk).get()
    assert new.status == RankerModelStatus.REFUSED and f"model {better.pk}" in new.reason
    assert "auc" in new.reason and f"model {new.pk} stored, not activated" in out.getvalue()
    assert RankerModel.objects.get(status=RankerModelStatus.ACTIVE) == better


def test_too_little_history_trains_nothing():
    with pytest.raises(CommandError, match="nothing trained"):
        call_command("train_ranker", stdout=io.StringIO())
    assert not RankerModel.objects.exists()
