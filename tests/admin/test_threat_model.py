"""Two lines of docs/threat-model.md that Django holds for us, checked so that a settings or template change
cannot drop them unnoticed: an admin action needs the CSRF token, and an agent's text is escaped where a
moderator reads it."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from items.models import ItemStatus
from tests.admin.conftest import item_in

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert("pwned")</script><img src=x onerror=alert(1)>'


def test_an_admin_action_without_the_csrf_token_is_refused(moderator):
    client = Client(enforce_csrf_checks=True)
    client.force_login(moderator)
    item = item_in(ItemStatus.FAILED)
    response = client.post(
        reverse("admin:items_processeditem_changelist"),
        {"action": "requeue_items", "_selected_action": [item.pk]},
    )
    assert response.status_code == 403
    item.refresh_from_db()
    assert item.status == ItemStatus.FAILED


def test_an_agents_text_is_escaped_on_the_moderators_pages(mod_client):
    item = item_in(ItemStatus.COMPLETED, summary=HOSTILE)
    item.raw.content = HOSTILE
    item.raw.save(update_fields=["content"])
    pages = [
        mod_client.get(reverse("admin:items_processeditem_change", args=[item.pk])),
        mod_client.get(reverse("admin:items_processeditem_changelist")),
    ]
    for page in pages:
        html = page.content.decode()
        assert page.status_code == 200
        assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert" in pages[0].content.decode()
