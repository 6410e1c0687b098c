"""An item's page agrees with itself: its Outcome section shows the analyzer, safety verdict, flag and risk of the
step that decided, for every status, taken from the decision history where the item's own fields are empty; a
held item says in words why and against which threshold; and a field with nothing to say is left off."""

from __future__ import annotations

import html as html_lib
import re

import pytest
from django.urls import reverse

from items.models import DecisionStage, ItemStatus, ModerationDecision, ProcessedItem
from tests.admin.conftest import discarded, item_in
from tests.factories import make_item
from tests.fakes.fixtures import SAFETY_MODEL
from tests.pipeline.enrichment.test_review_hold import run_once, safety

pytestmark = pytest.mark.django_db

ROW = re.compile(r'<div class="form-row field-(\w+)">.*?<div class="readonly">(.*?)</div>\s*</div>', re.S)


def page_rows(client, item) -> dict[str, str]:
    """Every field shown on the item's page, by name, with its text (tags stripped)."""
    response = client.get(reverse("admin:items_processeditem_change", args=[item.pk]))
    assert response.status_code == 200
    return {
        name: " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", contents)).split())
        for name, contents in ROW.findall(response.content.decode())
    }


def decide(item, stage, verdict, category="", reason="", model="", actor="pipeline"):
    ModerationDecision.objects.create(
        item=item,
        actor=actor,
        stage=stage,
        verdict=verdict,
        category=category,
        reason=reason,
        model=model,
        run=item.run,
    )


def passed(item, *stages, model="local"):
    for stage in stages:
        decide(item, stage, "pass", model=model if stage in (DecisionStage.SAFETY, DecisionStage.EXTRACTION) else "")


def outcome(rows: dict[str, str]) -> dict[str, str]:
    names = ("decided_by", "analyzer_used", "safety_verdict", "safety_flag", "safety_risk_read", "held_because")
    return {name: rows[name] for name in names if name in rows}


def test_a_discard_at_the_safety_gate_shows_that_steps_analyzer_verdict_and_flag(mod_client):
    """The issue's bomb-making post: the row has no analyzer (the extraction never ran) and, before this change,
    no risk; the safety decision has both the model and the flag."""
    item = discarded()
    passed(item, DecisionStage.BLACKLIST, DecisionStage.DUPLICATE)
    decide(item, DecisionStage.SAFETY, "unsafe", "violent_extremism", "Instructions for a bomb.", model="local")
    assert outcome(page_rows(mod_client, item)) == {
        "decided_by": "safety unsafe (violent_extremism): Instructions for a bomb.",
        "analyzer_used": "local",
        "safety_verdict": "unsafe",
        "safety_flag": "violent_extremism",
    }


@pytest.mark.parametrize(
    ("stage", "category", "reason", "expected"),
    [
        (DecisionStage.BLACKLIST, "keyword", "matched 'bomb'", "blacklist discard (keyword): matched 'bomb'"),
        (
            DecisionStage.DUPLICATE,
            "exact",
            "same content as item 3",
            "duplicate discard (exact): same content as item 3",
        ),
    ],
)
def test_a_discard_before_any_model_lists_no_analyzer_and_no_safety(mod_client, stage, category, reason, expected):
    item = discarded()
    if stage == DecisionStage.DUPLICATE:
        passed(item, DecisionStage.BLACKLIST)
    decide(item, stage, "discard", category, reason)
    assert outcome(page_rows(mod_client, item)) == {"decided_by": expected}


def test_a_quality_discard_shows_the_analyzer_and_the_safety_pass_before_it(mod_client):
    item = discarded(analyzer="gpt-main", quality=0.1, summary="Buy now", safety_risk=0.05)
    passed(item, DecisionStage.BLACKLIST, DecisionStage.DUPLICATE)
    decide(item, DecisionStage.SAFETY, "pass", reason="risk 0.05, under the review band", model="gpt-safety")
    decide(item, DecisionStage.EXTRACTION, "pass", model="gpt-main")
    decide(item, DecisionStage.QUALITY, "discard", "low_quality", "quality 0.10 < threshold 0.20", "gpt-main")
    assert outcome(page_rows(mod_client, item)) == {
        "decided_by": "quality discard (low_quality): quality 0.10 < threshold 0.20",
        "analyzer_used": "gpt-main",
        "safety_verdict": "pass (by gpt-safety)",
        "safety_risk_read": "risk 0.05, under the review band",
    }


def test_a_held_item_says_why_in_words_and_never_that_its_safety_passed(mod_client):
    """Recorded before the history said "uncertain" (a safety `pass` with the risk that held it): the page reads
    the hold, not the pass."""
    item = item_in(ItemStatus.REVIEW, analyzer="local", summary="A pistol frame kit", safety_risk=0.46)
    passed(item, DecisionStage.BLACKLIST, DecisionStage.DUPLICATE, DecisionStage.SAFETY, DecisionStage.EXTRACTION)
    band = "risk 0.46 is in the review band 0.35 to 0.50 (REVIEW_SAFETY_RISK 0.35)"
    decide(item, DecisionStage.REVIEW, "held", "safety_risk", band)
    shown = outcome(page_rows(mod_client, item))
    assert shown["safety_verdict"] == "uncertain"
    assert shown["held_because"] == f"safety uncertain: {band}"
    assert shown["safety_risk_read"] == "0.46"
    assert "pass" not in " ".join(shown.values())


@pytest.mark.parametrize(
    ("category", "reason", "words"),
    [
        ("borderline_quality", "quality 0.25 is in the review band 0.20 to 0.30", "borderline quality: quality 0.25"),
        ("reader_reports", "-1 scores weigh 3.0, at least 3.0 (REVIEW_READER_PULL_WEIGHT)", "readers reported it: -1"),
        ("unsure_discard", "discarded as spam with a confidence of 0.30, under 0.60", "unsure spam discard: discarded"),
    ],
)
def test_each_hold_says_why_in_words(mod_client, category, reason, words):
    item = item_in(ItemStatus.REVIEW, analyzer="local", summary="s")
    decide(
        item,
        DecisionStage.REVIEW,
        "held",
        category,
        reason,
        actor="readers" if category == "reader_reports" else "pipeline",
    )
    assert page_rows(mod_client, item)["held_because"].startswith(words)


def test_an_extraction_discard_shows_the_analyzer_that_discarded_it(mod_client):
    """The discard gate writes the extracted fields but, on a row from before the extraction's checkpoint kept the
    analyzer, only the decision names the model."""
    item = discarded(summary="Work from home, 500 a day")
    passed(item, DecisionStage.BLACKLIST, DecisionStage.DUPLICATE)
    decide(item, DecisionStage.SAFETY, "pass", model="gpt-safety")
    decide(item, DecisionStage.EXTRACTION, "discard", "spam", "Work from home, 500 a day", model="gpt-main")
    assert outcome(page_rows(mod_client, item)) == {
        "decided_by": "extraction discard (spam): Work from home, 500 a day",
        "analyzer_used": "gpt-main",
        "safety_verdict": "pass (by gpt-safety)",
    }


@pytest.mark.parametrize("status", [ItemStatus.PENDING, ItemStatus.PROCESSING])
def test_an_item_in_the_pipeline_says_it_is_not_decided_yet(mod_client, status):
    item = item_in(status)
    passed(item, DecisionStage.BLACKLIST, DecisionStage.DUPLICATE)
    rows = page_rows(mod_client, item)
    assert outcome(rows) == {"decided_by": "not decided yet: the pipeline is still working on it"}


def test_a_failed_item_shows_the_step_that_gave_up_and_its_error(mod_client):
    item = item_in(ItemStatus.FAILED, last_error="RetryLater: safety_check: ModelUnavailable", attempts=4)
    decide(item, DecisionStage.SAFETY, "hold", "ModelUnavailable", "connection refused")
    decide(item, DecisionStage.DELIVERY, "failed", "transient", "deliveries exhausted")
    rows = page_rows(mod_client, item)
    assert outcome(rows) == {"decided_by": "delivery failed (transient): deliveries exhausted"}
    assert rows["last_error"] == "RetryLater: safety_check: ModelUnavailable" and rows["attempts"] == "4"


def test_an_approved_item_names_the_moderator_who_decided(mod_client, moderator):
    item = item_in(ItemStatus.COMPLETED, analyzer="local", summary="s", safety_risk=0.4)
    decide(item, DecisionStage.SAFETY, "uncertain", reason="risk 0.40, in the review band 0.35 to 0.50", model="local")
    decide(item, DecisionStage.REVIEW, "held", "safety_risk", "risk 0.40 is in the review band 0.35 to 0.50")
    decide(item, DecisionStage.REVIEW, "approved", "published", actor=moderator.get_username())
    assert outcome(page_rows(mod_client, item)) == {
        "decided_by": f"review approved (published), by {moderator.get_username()}",
        "analyzer_used": "local",
        "safety_verdict": "uncertain",
        "safety_risk_read": "risk 0.40, in the review band 0.35 to 0.50",
    }


def test_no_field_is_listed_without_a_value(mod_client):
    """The issue counted fourteen rows of "-" on a discarded item's page."""
    item = discarded()
    decide(item, DecisionStage.BLACKLIST, "discard", "keyword", "matched 'bomb'")
    rows = page_rows(mod_client, item)
    assert [name for name, text in rows.items() if text in ("", "-")] == []
    for empty in ("raw_notes", "raw_url", "analyzer_used", "summary", "keywords", "suggestion", "expire_time"):
        assert empty not in rows
    assert {"raw_content", "status_badge", "reason_badge", "decided_by"} <= set(rows)


# --- from the pipeline itself ------------------------------------------------------------------------------


def test_the_pipelines_unsafe_discard_reads_on_the_page(fake_llm, mod_client):
    fake_llm.script("safety", {"safe": False, "flag": "violent_extremism", "reason": "Bomb-making.", "risk": 0.97})
    pk = make_item(content="Step by step: how to build a pipe bomb from hardware store parts.").pk
    run_once(pk)
    item = ProcessedItem.objects.get(pk=pk)
    assert (item.status, item.analyzer, item.safety_risk) == (ItemStatus.DISCARDED, "", 0.97)
    shown = outcome(page_rows(mod_client, item))
    assert shown["analyzer_used"] == SAFETY_MODEL  # the model of the step that decided
    assert (shown["safety_verdict"], shown["safety_flag"], shown["safety_risk_read"]) == (
        "unsafe",
        "violent_extremism",
        "0.97",
    )


def test_the_pipelines_hold_reads_as_uncertain_on_the_page_and_in_the_history(fake_llm, mod_client, settings):
    settings.REVIEW_SAFETY_RISK = 0.35
    fake_llm.script("safety", safety(0.46))
    pk = make_item(content="Selling a kit to finish an unserialised pistol frame at home.").pk
    run_once(pk)
    item = ProcessedItem.objects.get(pk=pk)
    shown = outcome(page_rows(mod_client, item))
    assert shown["safety_verdict"].startswith("uncertain")
    assert (
        shown["held_because"]
        == "safety uncertain: risk 0.46 is in the review band 0.35 to 1.00 (REVIEW_SAFETY_RISK 0.35)"
    )
    history = list(item.decisions.filter(stage=DecisionStage.SAFETY).values_list("verdict", flat=True))
    assert history == ["uncertain"]


def test_a_waiting_item_says_what_holds_it_up(mod_client):
    """The model endpoint failing (the pipeline's waiting-reason port, as the author's status_detail reads it)."""
    from items import ports

    before = ports.connected()
    ports.connect(
        query_embedder=before.query_embedder,
        claim_holder_gone=before.claim_holder_gone,
        suggestion_requester=before.suggestion_requester,
        waiting_reason=lambda: "the model endpoint is failing",
    )
    try:
        waiting = page_rows(mod_client, item_in(ItemStatus.PENDING))
        done = page_rows(mod_client, item_in(ItemStatus.COMPLETED, summary="s"))
    finally:
        ports.connect(
            query_embedder=before.query_embedder,
            claim_holder_gone=before.claim_holder_gone,
            suggestion_requester=before.suggestion_requester,
            waiting_reason=before.waiting_reason,
        )
    assert waiting["waiting_because"] == "the model endpoint is failing"
    assert "waiting_because" not in done
