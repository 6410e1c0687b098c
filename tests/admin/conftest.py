"""Admin test users: a moderator (in the `moderators` group made by the data migration, staff, not superuser)
and a plain staff user without the group, each with a logged-in Django test client."""

from __future__ import annotations

import itertools

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from items.models import ItemStatus, ProcessedItem
from tests.factories import make_item

_seq = itertools.count(1)


def make_user(*, moderator: bool) -> User:
    user = User.objects.create_user(username=f"{'mod' if moderator else 'staff'}-{next(_seq)}", is_staff=True)
    if moderator:
        user.groups.add(Group.objects.get(name="moderators"))
    return user


@pytest.fixture
def moderator(db) -> User:
    return make_user(moderator=True)


@pytest.fixture
def staff(db) -> User:
    return make_user(moderator=False)


@pytest.fixture
def mod_client(moderator) -> Client:
    client = Client()
    client.force_login(moderator)
    return client


@pytest.fixture
def staff_client(staff) -> Client:
    client = Client()
    client.force_login(staff)
    return client


def item_in(status: str, **fields) -> ProcessedItem:
    """A published item moved to `status` (and any other fields) as the pipeline would have left it."""
    raw = make_item()
    ProcessedItem.objects.filter(pk=raw.pk).update(status=status, **fields)
    return ProcessedItem.objects.get(pk=raw.pk)


def discarded(**fields) -> ProcessedItem:
    return item_in(ItemStatus.DISCARDED, reason="content_evaluation", **fields)


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]] if response.context else []
