"""Analyzer models in the database (pipeline/analyzer_models.py, pipeline/moderator_labels.py, the admin page):
moderators' decisions become labels for the right gate; the active model serves, a model this code cannot read is
refused and counted; only a user with the activate permission rolls back."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from prometheus_client import REGISTRY

from items.models import DecisionStage, ModerationDecision
from items.services.moderation import item_review_approve, item_review_reject
from pipeline import analyzer_models
from pipeline.llm import local
from pipeline.llm.local import gates
from pipeline.models import AnalyzerModel, AnalyzerModelState
from pipeline.moderator_labels import moderator_examples
from tests.admin.conftest import make_user
from tests.factories import make_held_item

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_state():
    analyzer_models.forget_active()
    yield
    analyzer_models.forget_active()


def _stored(state: str = AnalyzerModelState.ACTIVE, **document_changes) -> AnalyzerModel:
    document = {**gates.to_document(gates.shipped()), "version": "stored", **document_changes}
    return AnalyzerModel.objects.create(contract=gates.CONTRACT, document=document, state=state)


def test_review_decisions_label_the_gate_that_held_the_item():
    moderator = make_user(moderator=True)
    unsafe = make_held_item(content="Courier needed, carry sealed envelopes, cash in hand, no questions asked.")
    bait = make_held_item(content="Easy side income, message me for the details.", held_category="borderline_quality")
    fine = make_held_item(content="Our pentest team reviews your payment flow for injection bugs.")
    item_review_reject(item=unsafe, moderator=moderator, reason="drug courier recruitment")
    item_review_reject(item=bait, moderator=moderator, reason="vague bait")
    item_review_approve(item=fine, moderator=moderator)
    labels = {(example.text, example.gate): example.positive for example in moderator_examples()}
    # A decision on a post held for its safety risk teaches the stance layer too (unsafe against edgy); a rejection
    # teaches the topic layer that it is about harm (an approval says nothing of its topic).
    assert labels == {
        (unsafe.raw.content, "safety"): True,
        (unsafe.raw.content, "stance"): True,
        (unsafe.raw.content, "topic"): True,
        (bait.raw.content, "spam"): True,
        (fine.raw.content, "safety"): False,
        (fine.raw.content, "stance"): False,
    }


def test_a_pipeline_or_reader_decision_alone_is_no_label():
    make_held_item(content="held but not yet decided by anyone")
    held = make_held_item(content="pulled by readers", held_category="reader_reports")
    ModerationDecision.objects.create(item=held, actor="readers", stage=DecisionStage.REVIEW, verdict="rejected")
    assert moderator_examples() == []


def test_a_reader_pulled_item_rejected_as_spam_labels_the_spam_gate():
    moderator = make_user(moderator=True)
    pulled = make_held_item(content="Follow me and I follow back, F4F", held_category="reader_reports")
    item_review_reject(item=pulled, moderator=moderator, reason="spam, engagement bait")
    assert [(e.gate, e.positive) for e in moderator_examples()] == [("spam", True)]


def test_an_approved_reader_pulled_item_teaches_safety_but_not_stance():
    """Readers pulled it, a moderator kept it: not unsafe, but on no risky topic the stance layer should learn."""
    pulled = make_held_item(content="Our bakery now opens at 7 on Sundays", held_category="reader_reports")
    item_review_approve(item=pulled, moderator=make_user(moderator=True))
    assert [(e.gate, e.positive) for e in moderator_examples()] == [("safety", False)]


@override_settings(ANALYZER_MODEL_RELOAD_SECONDS=0)
def test_the_active_model_serves_and_none_active_means_the_shipped_one():
    assert analyzer_models.active_gates().version == "shipped"
    _stored()
    assert analyzer_models.active_gates().version == "stored"


@override_settings(ANALYZER_MODEL_RELOAD_SECONDS=0)
def test_a_stored_model_of_another_contract_is_refused_and_counted():
    def fallbacks() -> float:
        return REGISTRY.get_sample_value("eigenflux_analyzer_model_fallbacks_total", {"reason": "contract"}) or 0.0

    before = fallbacks()
    _stored(contract="gates_v0")
    assert analyzer_models.active_gates().version == "shipped"
    assert fallbacks() == before + 1


def test_activation_needs_the_permission_and_retires_the_previous_model():
    first, second = _stored(), _stored(state=AnalyzerModelState.RETIRED)
    url = "/admin/pipeline/analyzermodel/"
    moderator = Client()
    moderator.force_login(make_user(moderator=True))
    assert moderator.get(url).status_code == 200  # moderators see the models
    moderator.post(url, {"action": "activate_model", "_selected_action": [second.pk]})
    assert AnalyzerModel.objects.get(pk=second.pk).state == AnalyzerModelState.RETIRED
    superuser = Client()
    superuser.force_login(User.objects.create_superuser("root", "root@example.com", "x"))
    superuser.post(url, {"action": "activate_model", "_selected_action": [second.pk]})
    assert AnalyzerModel.objects.get(pk=second.pk).state == AnalyzerModelState.ACTIVE
    assert AnalyzerModel.objects.get(pk=first.pk).state == AnalyzerModelState.RETIRED
    assert AnalyzerModel.objects.get(pk=second.pk).activated_by == "root"


def test_a_model_this_code_cannot_read_is_never_activated():
    broken = _stored(state=AnalyzerModelState.RETIRED, contract="gates_v0")
    with pytest.raises(gates.ContractMismatch):
        analyzer_models.activate(broken, actor="root")
    assert AnalyzerModel.objects.get(pk=broken.pk).state == AnalyzerModelState.RETIRED


def test_the_evaluation_gate_allows_one_held_out_post_and_refuses_two():
    active = {"unsafe_blocked_or_held": 1.0, "edgy_passed": 0.9}
    one_fewer = {"unsafe_blocked_or_held": 0.99, "edgy_passed": 0.95, "counts": {"unsafe_blocked_or_held": 100}}
    two_fewer = {**one_fewer, "unsafe_blocked_or_held": 0.98}
    assert analyzer_models._verdict(one_fewer, active)[0]
    refused, note = analyzer_models._verdict(two_fewer, active)
    assert not refused and "unsafe_blocked_or_held 0.980 < 1.000" in note
    # The stored figures are rounded to four places: one edgy post of 63 lost (0.9841) is still one post.
    rounded = {"edgy_passed": 0.9841, "counts": {"edgy_passed": 63}}
    assert analyzer_models._verdict(rounded, {"edgy_passed": 1.0})[0]


@pytest.mark.django_db(transaction=True)
@override_settings(ANALYZER_MODEL_RELOAD_SECONDS=0)
def test_judging_in_a_thread_opens_no_database_connection():
    """A consumer warms the analyzer up in a thread of its own that ends at once: judging reads the model the
    pipeline served, never the database, so no connection is opened there to leak (one kept the bench's scratch
    database from being dropped)."""
    import threading

    from django.db import connection

    left_open = []

    analyzer_models.active_gates()  # what the consumer does before each item, on its own thread

    def warm():
        local.safety_verdict(content="Selling a used road bike in Leeds, 54 cm frame.")
        left_open.append(connection.connection is not None)

    thread = threading.Thread(target=warm)
    thread.start()
    thread.join()
    assert left_open == [False]
