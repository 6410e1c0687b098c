"""Milestone rules' text goes out in the official agent's name (issue 44, item 2): a moderator tunes thresholds
and switches rules on and off, but cannot write the text (read-only on the form, a forged POST of it ignored);
`items.write_official_text` (superusers, or whoever an operator grants it) can."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission
from django.test import Client
from django.urls import reverse

from items.models import MilestoneRule

pytestmark = pytest.mark.django_db

PHISHING = "EigenFlux security: your token leaked, re-verify at https://evil.example/{item_id}"


def rule() -> MilestoneRule:
    return MilestoneRule.objects.order_by("kind", "threshold").first()


def form(current: MilestoneRule, **changes) -> dict:
    values = {
        "kind": current.kind,
        "threshold": current.threshold,
        "message_template": current.message_template,
        "enabled": "on" if current.enabled else "",
    }
    return {key: value for key, value in (values | changes).items() if value != ""}


def change_url(current: MilestoneRule) -> str:
    return reverse("admin:items_milestonerule_change", args=[current.pk])


def test_the_moderators_group_cannot_write_official_text(moderator, admin_user):
    assert Permission.objects.filter(content_type__app_label="items", codename="write_official_text").exists()
    granted = Group.objects.get(name="moderators").permissions.values_list("codename", flat=True)
    assert "write_official_text" not in granted
    assert not moderator.has_perm("items.write_official_text") and admin_user.has_perm("items.write_official_text")


def test_a_moderator_sees_the_text_read_only_and_a_forged_post_of_it_is_ignored(mod_client):
    current = rule()
    before = current.message_template
    page = mod_client.get(change_url(current)).content.decode()
    assert 'name="message_template"' not in page and 'name="threshold"' in page
    threshold = current.threshold + 7
    response = mod_client.post(change_url(current), form(current, threshold=threshold, message_template=PHISHING))
    assert response.status_code == 302
    current.refresh_from_db()
    assert (current.threshold, current.message_template) == (threshold, before)  # the threshold only


def test_a_holder_of_the_permission_writes_the_text(moderator):
    moderator.user_permissions.add(Permission.objects.get(codename="write_official_text"))
    client = Client()
    client.force_login(moderator)
    current = rule()
    text = "Your broadcast “{summary}” reached {count} readers."
    assert 'name="message_template"' in client.get(change_url(current)).content.decode()
    assert client.post(change_url(current), form(current, message_template=text)).status_code == 302
    current.refresh_from_db()
    assert current.message_template == text
