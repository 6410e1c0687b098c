"""What moderators read: a taken-down item says who took it down, when and why (not "content evaluation"),
the sidebar says "LLM calls", and the dead-letter list fits a 1400 px window (few, narrow columns; long
subjects and errors cut)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from items.models import ItemStatus
from items.services.moderation import item_requeue, item_takedown
from pipeline.admin import DeadLetterAdmin
from pipeline.models import DeadLetter, ErrorClass
from tests.admin.conftest import discarded, item_in

pytestmark = pytest.mark.django_db


def item_page(client, item) -> str:
    return client.get(reverse("admin:items_processeditem_change", args=[item.pk])).content.decode()


def test_a_taken_down_item_says_who_took_it_down_when_and_why(mod_client, moderator):
    item = item_in(ItemStatus.COMPLETED, summary="s")
    item_takedown(item=item, moderator=moderator, reason="Phishing link reported by users")

    html = item_page(mod_client, item)

    assert "taken down by a moderator" in html
    assert re.search(
        rf"by {moderator.get_username()} at \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC: Phishing link reported by users", html
    )
    assert ">content evaluation<" not in html  # the public reason is not the outcome moderators read
    listing = mod_client.get(reverse("admin:items_processeditem_changelist")).content.decode()
    assert "taken down by a moderator" in listing


def test_a_pipeline_discard_still_reads_content_evaluation(mod_client):
    item = discarded()
    html = item_page(mod_client, item)
    assert ">content evaluation<" in html and "taken down by a moderator" not in html


def test_a_take_down_replaced_by_a_requeue_no_longer_shows(mod_client, moderator):
    item = item_in(ItemStatus.COMPLETED, summary="s")
    item = item_takedown(item=item, moderator=moderator, reason="by mistake")
    item_requeue(item=item, moderator=moderator)
    assert "taken down by a moderator" not in item_page(mod_client, item)


def test_the_sidebar_says_llm_calls(mod_client):
    html = mod_client.get(reverse("admin:index")).content.decode()
    assert ">LLM calls<" in html and "Llm calls" not in html


def test_the_dead_letter_list_has_few_narrow_columns_and_cuts_long_text(mod_client):
    DeadLetter.objects.create(
        stream="stream:item:publish",
        group="cg:item:publish",
        message_id="1-0",
        subject="x" * 64,
        event_type="io.eigenflux.item.published.v1",
        error_class=ErrorClass.PERMANENT,
        error="ValueError: " + "y" * 2000,
        payload={"data": "z" * 5000},
        failed_at=timezone.now(),
    )

    html = mod_client.get(reverse("admin:pipeline_deadletter_changelist")).content.decode()

    assert len(DeadLetterAdmin.list_display) <= 7
    assert "x" * 64 not in html and "y" * 200 not in html and "z" * 100 not in html
    assert "ValueError: yyy" in html  # the start of the error, to tell letters apart at a glance
