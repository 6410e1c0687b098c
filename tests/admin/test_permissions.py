"""The `moderators` group: exactly the permissions the moderator admin needs; a moderator is not a superuser
and can use every page; a plain staff user without the group can use none of them."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from items.models import ItemStatus, OutboxEvent, ProcessedItem
from pipeline.models import DeadLetter
from tests.admin.conftest import discarded

EXPECTED = {
    "items.view_processeditem",
    "items.change_processeditem",
    "items.view_agent",
    "items.add_agent",
    "items.change_agent",
    "items.view_agenttoken",
    "items.change_agenttoken",
    "items.view_blacklistkeyword",
    "items.add_blacklistkeyword",
    "items.change_blacklistkeyword",
    "items.delete_blacklistkeyword",
    "items.view_milestonerule",
    "items.change_milestonerule",
    "pipeline.view_deadletter",
    "pipeline.change_deadletter",
    "pipeline.view_llmcall",
    "pipeline.view_llmcallhourly",
    "pipeline.view_analyzermodel",
    "django_rq.admin",
}

PAGES = [
    "admin:items_processeditem_changelist",
    "admin:items_blacklistkeyword_changelist",
    "admin:items_blacklistkeyword_add",
    "admin:items_agent_changelist",
    "admin:items_agent_add",
    "admin:items_agenttoken_changelist",
    "admin:items_milestonerule_changelist",
    "admin:pipeline_deadletter_changelist",
    "admin:pipeline_llmcall_changelist",
    "admin:pipeline_llmcallhourly_changelist",
    "admin:pipeline_analyzermodel_changelist",
    "admin:pipeline_health",
    "admin:pipeline_prompts",
]


def test_the_group_has_exactly_the_needed_permissions(db):
    group = Group.objects.get(name="moderators")
    granted = {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.select_related("content_type")}
    assert granted == EXPECTED


def test_a_moderator_is_staff_but_not_superuser(moderator):
    assert moderator.is_staff and not moderator.is_superuser
    assert moderator.has_perm("items.change_processeditem")
    assert not moderator.has_perm("items.delete_processeditem")
    assert not moderator.has_perm("auth.change_user")


@pytest.mark.parametrize("name", PAGES)
def test_moderator_can_open_every_page(mod_client, name):
    assert mod_client.get(reverse(name)).status_code == 200


@pytest.mark.parametrize("name", PAGES)
def test_plain_staff_cannot_open_them(staff_client, name):
    assert staff_client.get(reverse(name)).status_code == 403


def test_machine_made_rows_cannot_be_added_or_deleted(mod_client):
    for name in ("admin:items_processeditem_add", "admin:pipeline_deadletter_add", "admin:items_agenttoken_add"):
        assert mod_client.get(reverse(name)).status_code == 403
    item = discarded()
    assert mod_client.get(reverse("admin:items_processeditem_delete", args=[item.pk])).status_code == 403


def test_plain_staff_cannot_run_an_action(staff_client):
    item = discarded()
    response = staff_client.post(
        reverse("admin:items_processeditem_changelist"), {"action": "requeue_items", "_selected_action": [item.pk]}
    )
    assert response.status_code == 403
    assert ProcessedItem.objects.get(pk=item.pk).status == ItemStatus.DISCARDED
    assert not OutboxEvent.objects.filter(subject=str(item.pk), envelope__replay="1").exists()


def test_a_viewer_without_change_permission_gets_no_actions(staff, client):
    from django.contrib.auth.models import Permission

    staff.user_permissions.add(Permission.objects.get(codename="view_processeditem"))
    client.force_login(staff)
    item = discarded()

    page = client.get(reverse("admin:items_processeditem_changelist"))
    assert page.status_code == 200
    assert page.context["action_form"] is None  # no action is offered without the change permission

    client.post(
        reverse("admin:items_processeditem_changelist"), {"action": "requeue_items", "_selected_action": [item.pk]}
    )
    assert ProcessedItem.objects.get(pk=item.pk).status == ItemStatus.DISCARDED


def test_plain_staff_cannot_requeue_a_dead_letter(staff_client):
    from django.utils import timezone

    letter = DeadLetter.objects.create(
        stream="s", group="g", message_id="1-0", error_class="transient", failed_at=timezone.now()
    )
    response = staff_client.post(
        reverse("admin:pipeline_deadletter_changelist"), {"action": "requeue_letters", "_selected_action": [letter.pk]}
    )
    assert response.status_code == 403
    assert DeadLetter.objects.get(pk=letter.pk).state == "open"


def test_index_links_the_pipeline_pages_and_job_queues(mod_client):
    html = mod_client.get(reverse("admin:index")).content.decode()
    assert reverse("admin:pipeline_health") in html
    assert reverse("admin:pipeline_prompts") in html
    assert reverse("django_rq:home") in html


def test_django_rq_pages_need_the_moderators_permission(mod_client, staff_client):
    assert mod_client.get(reverse("django_rq:home")).status_code == 200
    assert staff_client.get(reverse("django_rq:home")).status_code == 403


def test_anonymous_users_are_sent_to_login(client):
    response = client.get(reverse("admin:pipeline_health"))
    assert response.status_code == 302 and "/login/" in response["Location"]
