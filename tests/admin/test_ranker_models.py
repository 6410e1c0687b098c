"""The learned rankers in the admin (docs/feed-ranker.md#the-admin): listed with their status, held-out metrics,
training data and checks; only a superuser may activate one (a rollback), never one the gate refused or one
that fails its self-tests; the health page names an active model that is refused."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from items.models import RankerModel, RankerModelStatus
from pipeline.health_snapshot import health_snapshot
from tests.admin.conftest import make_user, messages_of
from tests.items.ranker.factories import document, stored_model

pytestmark = pytest.mark.django_db
CHANGELIST = "admin:items_rankermodel_changelist"


@pytest.fixture
def models():
    active = stored_model(document({"match": 1.0}))
    active.metrics = {"held_out": {"auc": 0.71, "logged_ndcg": 0.6, "ips": 0.2}, "baseline": {"ranking": "formula"}}
    active.save()
    earlier = stored_model(document({"match": 2.0}), status=RankerModelStatus.RETIRED)
    refused = stored_model(document({"match": 3.0}), status=RankerModelStatus.REFUSED)
    return active, earlier, refused


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _activate(client: Client, model: RankerModel):
    data = {"action": "activate", "_selected_action": [model.pk]}
    return client.post(reverse(CHANGELIST), data, follow=True)


def test_a_viewer_sees_the_models_but_cannot_roll_back(models):
    active, earlier, _ = models
    viewer = make_user(moderator=False)
    viewer.user_permissions.add(Permission.objects.get(codename="view_rankermodel"))
    client = _client(viewer)
    page = client.get(reverse(CHANGELIST))
    assert page.status_code == 200
    text = page.content.decode()
    assert "0.710 / 0.600 / 0.200" in text and "contract and self-tests pass" in text
    assert 'value="activate"' not in text
    _activate(client, earlier)  # a forged POST
    assert RankerModel.objects.get(status=RankerModelStatus.ACTIVE) == active
    detail = client.get(reverse("admin:items_rankermodel_change", args=[active.pk])).content.decode()
    assert "<td>match</td><td>+1.000</td>" in detail and "&quot;rows&quot;: 0" in detail  # weights, provenance
    assert client.get(reverse("admin:items_rankermodel_add")).status_code == 403  # machine-made rows
    assert client.get(reverse("admin:items_rankermodel_delete", args=[active.pk])).status_code == 403


def test_a_superuser_rolls_back_but_not_to_a_refused_or_broken_model(models):
    active, earlier, refused = models
    client = _client(User.objects.create_superuser("root", "root@example.org", "pw"))
    assert "refused by the gate" in " ".join(messages_of(_activate(client, refused)))
    broken = document({"match": 4.0})
    broken["self_tests"][1]["logit"] = 0.5
    broken = stored_model(broken, status=RankerModelStatus.RETIRED)
    assert "self-test" in " ".join(messages_of(_activate(client, broken)))
    assert RankerModel.objects.get(status=RankerModelStatus.ACTIVE) == active
    assert f"Model {earlier.pk} is active" in " ".join(messages_of(_activate(client, earlier)))
    assert RankerModel.objects.get(status=RankerModelStatus.ACTIVE) == earlier
    active.refresh_from_db()
    assert active.status == RankerModelStatus.RETIRED


def test_the_health_page_names_an_active_model_that_is_refused(models, mod_client):
    active, _, _ = models
    assert health_snapshot()["ranker_problem"] == ""
    assert 'id="health-ranker"' not in mod_client.get(reverse("admin:pipeline_health")).content.decode()
    doc = active.document
    doc["contract"] = "ranker_features_v9"
    RankerModel.objects.filter(pk=active.pk).update(document=doc)
    problem = health_snapshot()["ranker_problem"]
    assert f"ranker model {active.pk} refused (contract" in problem and "formula" in problem
    html = mod_client.get(reverse("admin:pipeline_health")).content.decode()
    assert f'id="health-ranker">Feed ranker: ranker model {active.pk} refused (contract' in html
