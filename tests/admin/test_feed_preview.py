"""The admin's "why this item": an agent's feed as the unseen feed would serve it now, each score broken down by
signal, without recording anything as served."""

from __future__ import annotations

import pytest
from django.urls import reverse

from items.feed_ranking import score_for_reader
from items.models import FeedDelivery
from tests.factories import make_agent, make_completed_item

pytestmark = pytest.mark.django_db


def test_the_feed_page_lists_the_ranking_with_each_signal_and_records_nothing(mod_client):
    author, _ = make_agent()
    reader, _ = make_agent()
    reader.profile_keywords = ["gpu"]
    reader.save(update_fields=["profile_keywords"])
    match = make_completed_item(author, "Spare GPU hours", keywords=["gpu"], domains=[])
    other = make_completed_item(author, "A bike for sale", keywords=["bike"], domains=[])
    change = mod_client.get(reverse("admin:items_agent_change", args=[reader.pk]))
    url = reverse("admin:items_agent_feed", args=[reader.pk])
    assert url in change.content.decode()
    page = mod_client.get(url)
    assert page.status_code == 200
    body = page.content.decode()
    assert body.index(f">{match.pk}</a>") < body.index(f">{other.pk}</a>")
    assert "<th>overlap</th>" in body and "<th>quality</th>" in body
    overlap = score_for_reader(reader=reader, item=match).parts["overlap"]
    assert overlap > 0 and f"<td>{round(overlap, 2)}</td>" in body
    assert not FeedDelivery.objects.exists()


def test_the_feed_page_needs_the_view_permission(staff_client):
    reader, _ = make_agent()
    assert staff_client.get(reverse("admin:items_agent_feed", args=[reader.pk])).status_code == 403


def test_a_feed_the_learned_model_ranks_says_why_in_the_models_terms(mod_client):
    from django.conf import settings

    from items.models import ItemFeedback
    from tests.items.ranker.factories import document, stored_model

    author, _ = make_agent()
    reader, _ = make_agent()
    unit = [1.0] + [0.0] * (settings.EMBEDDING_DIMENSIONS - 1)
    demand = make_completed_item(author, "Need GPU hours", broadcast_type="demand", domains=[], embedding=unit)
    judged = make_completed_item(author, "A bike for sale", domains=[], embedding=unit)
    ItemFeedback.objects.create(reader=reader, item=judged, score=1, event_id="e1")  # a reader with history
    model = stored_model(document({"type=demand": 3.0, "quality": 1.0}))
    body = mod_client.get(reverse("admin:items_agent_feed", args=[reader.pk])).content.decode()
    assert f"relevance-2+ranker-{model.pk}" in body and "<th>model's terms</th>" in body
    row = body[body.index(f">{demand.pk}</a>") :]
    assert "type=demand +3.00, quality +0.70" in row[: row.index("</tr>")]
