"""The learning loop end to end (docs/analyzer-learning.md): moderators reject held posts of a kind the shipped gates
let through; `manage.py train_analyzer` trains on them, passes the evaluation gate and activates the new model;
unseen posts of the same kind, in other words and languages, are then stopped. Decisions that would make the
analyzer worse (moderators approving blatant harm) give a model the evaluation gate refuses."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import override_settings

from items.services.moderation import item_review_approve, item_review_reject
from pipeline import analyzer_models
from pipeline.llm import local
from pipeline.llm.local import gate_data, gates
from pipeline.models import AnalyzerModel, AnalyzerModelState
from tests.factories import make_held_item

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

# Written for this test: couriers recruited to carry sealed parcels across a border, no questions asked — a crime
# offered as an ordinary job, in words no rule names. The rejected posts teach; the unseen ones are judged.
REJECTED = [
    "Weekend driving gig: carry a sealed bag from Lyon to Geneva, 800 EUR per trip, cash, no questions.",
    "Drivers wanted for short cross-border runs, the package stays sealed, you get paid on delivery, no receipts.",
    "Easy money for car owners: drive a closed box over the border once a week, don't open it, cash in hand.",
    "周末兼职：帮忙把密封包裹开车带过边境，每趟现金八百，不要打开也别多问。",
    "週末の運転バイト：封をした荷物を国境の向こうへ運ぶだけ、現金払い、中身は見ないこと。",
    "Need someone with a clean licence to take a taped-up parcel across the border tonight, 1000 cash, no chat.",
]
UNSEEN = [
    "Looking for reliable drivers to move small sealed packages between Spain and France, cash per run, discretion.",
    "有车的朋友赚点外快：每周帮忙把封好的箱子送过关，不用知道里面是什么，现金结算。",
    "車をお持ちの方、国境を越えて封印された小包を届けるだけの簡単なお仕事。中身の確認は不要、報酬は現金で。",
]


@pytest.fixture(autouse=True)
def _served_model_forgotten():
    yield
    analyzer_models.forget_active()  # the next test judges with the shipped gates again


def _stopped(text: str, settings) -> bool:
    verdict = local.safety_verdict(content=text)
    return not verdict.safe or verdict.risk >= settings.REVIEW_SAFETY_RISK


@override_settings(ANALYZER_MODEL_RELOAD_SECONDS=0)
def test_moderators_rejections_teach_the_gate_and_a_worse_model_is_refused(settings):
    analyzer_models.forget_active()
    probability_before = {text: gates.current().safety_probability(text) for text in UNSEEN}
    passed_before = [text for text in UNSEEN if not _stopped(text, settings)]
    assert len(passed_before) >= 2, "the shipped gates already stop the unseen posts: the test proves nothing"
    # A staff user, not the `moderators` group's: a transactional test before this one may have flushed the group.
    moderator = User.objects.create_user(username="loop-moderator", is_staff=True)
    for text in REJECTED:
        item_review_reject(item=make_held_item(content=text), moderator=moderator, reason="drug courier recruitment")

    call_command("train_analyzer")

    learned = AnalyzerModel.objects.get(state=AnalyzerModelState.ACTIVE)
    assert learned.moderator_labels == len(REJECTED)
    assert analyzer_models.active_gates().version == learned.document["version"]
    after = {text: (_stopped(text, settings), gates.current().safety_probability(text)) for text in UNSEEN}
    rises = {text[:24]: f"{probability_before[text]:.2f} -> {after[text][1]:.2f}" for text in UNSEEN}
    # Every unseen post reads as more likely unsafe, and a post that passed before is now stopped. (Measured on
    # 6 December: English 0.05 -> 0.17, still passed; Chinese 0.61 -> 0.81, now held; Japanese 0.96 -> 0.99.)
    assert all(after[text][1] > probability_before[text] for text in UNSEEN), rises
    assert any(after[text][0] for text in passed_before), rises
    ordinary = "Hiring a delivery driver for our bakery, weekend mornings, 15 EUR an hour, van provided."
    assert not _stopped(ordinary, settings)

    # Poison: moderators approve blatant harm the analyzer blocks. The candidate is worse on the held-out sets.
    unsafe = [case["text"] for case in gate_data.read_jsonl(gate_data.SAFETY_TRAIN) if case["label"] == "unsafe"]
    for text in unsafe[:150]:
        item_review_approve(item=make_held_item(content=text), moderator=moderator)
    with pytest.raises(CommandError, match="not activated"):
        call_command("train_analyzer")
    refused = AnalyzerModel.objects.order_by("-pk").first()
    assert refused.state == AnalyzerModelState.REFUSED
    assert "unsafe_blocked_or_held" in refused.note
    assert AnalyzerModel.objects.get(state=AnalyzerModelState.ACTIVE).pk == learned.pk
