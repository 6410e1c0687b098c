"""A dead letter's own page handles it as the list does: Requeue and Resolve buttons that post the list's actions
for this letter (same permission, same confirmation, same service), then lead back to the letter."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from items.models import OutboxEvent
from pipeline.models import DeadLetterState
from tests.admin.conftest import make_user, messages_of
from tests.admin.test_dead_letters import CHANGELIST, letter

pytestmark = pytest.mark.django_db

BACK = "_back_to_object"


def page(pk: int) -> str:
    return reverse("admin:pipeline_deadletter_change", args=[pk])


def buttons(html: str) -> dict[str, bool]:
    """Each action button on the page: its action and whether it can be pressed."""
    found = {}
    for form in html.split('<form method="post"')[1:]:
        if 'name="action"' not in form:
            continue
        action = form.split('name="action" value="')[1].split('"')[0]
        found[action] = "disabled" not in form.split("</button>")[0].split("<button")[1]
    return found


def test_an_open_letter_page_has_requeue_and_resolve(mod_client):
    row = letter()
    html = mod_client.get(page(row.pk)).content.decode()
    assert buttons(html) == {"requeue_letters": True, "resolve_letters": True}
    assert 'name="csrfmiddlewaretoken"' in html and f'name="{BACK}" value="{row.pk}"' in html


def test_a_closed_letter_page_offers_them_disabled(mod_client):
    row = letter(state=DeadLetterState.RESOLVED)
    assert buttons(mod_client.get(page(row.pk)).content.decode()) == {
        "requeue_letters": False,
        "resolve_letters": False,
    }


def test_requeue_from_the_page_requeues_and_comes_back(mod_client, moderator):
    row = letter()
    response = mod_client.post(
        CHANGELIST, {"action": "requeue_letters", "_selected_action": [row.pk], BACK: str(row.pk)}
    )
    assert response.status_code == 302 and response["Location"] == page(row.pk)
    row.refresh_from_db()
    assert (row.state, row.resolved_by) == (DeadLetterState.REQUEUED, moderator)
    assert OutboxEvent.objects.filter(subject="7").count() == 1
    assert "Requeued 1 dead letter." in messages_of(mod_client.get(page(row.pk)))


def test_resolve_from_the_page_asks_for_a_note_then_comes_back(mod_client, moderator):
    row = letter()
    asked = mod_client.post(CHANGELIST, {"action": "resolve_letters", "_selected_action": [row.pk], BACK: row.pk})
    html = asked.content.decode()
    assert asked.status_code == 200 and 'name="note"' in html
    assert f'name="{BACK}" value="{row.pk}"' in html  # the confirmation leads back to the letter too
    row.refresh_from_db()
    assert row.state == DeadLetterState.OPEN

    confirmed = {"action": "resolve_letters", "_selected_action": [row.pk], BACK: row.pk, "confirm": "1"}
    response = mod_client.post(CHANGELIST, {**confirmed, "note": "the item was deleted by its author"})
    assert response.status_code == 302 and response["Location"] == page(row.pk)
    row.refresh_from_db()
    assert (row.state, row.note, row.resolved_by) == (
        DeadLetterState.RESOLVED,
        "the item was deleted by its author",
        moderator,
    )


def test_a_user_who_may_only_view_letters_gets_no_buttons_and_is_refused():
    viewer = make_user(moderator=False)
    viewer.user_permissions.add(Permission.objects.get(codename="view_deadletter"))
    client = Client()
    client.force_login(viewer)
    row = letter()

    html = client.get(page(row.pk)).content.decode()
    assert buttons(html) == {"requeue_letters": False, "resolve_letters": False}

    for action in ("requeue_letters", "resolve_letters"):
        post = {"action": action, "_selected_action": [row.pk], BACK: row.pk, "confirm": "1", "note": "x"}
        client.post(CHANGELIST, post)
    row.refresh_from_db()
    assert row.state == DeadLetterState.OPEN and row.resolved_by is None
    assert not OutboxEvent.objects.filter(subject="7").exists()


def test_an_open_letter_page_lists_no_empty_handling_fields(mod_client):
    html = mod_client.get(page(letter().pk)).content.decode()
    assert "field-state_badge" in html
    assert "field-resolved_by" not in html and "field-note" not in html  # nobody resolved it: no "-" rows
