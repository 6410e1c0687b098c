"""Blacklist keyword writes; each one invalidates the pipeline's cache once it commits."""

from __future__ import annotations

from django.db import transaction

from items.blacklist_cache import blacklist_invalidate
from items.models import BlacklistKeyword


def _normalise(keyword: str) -> str:
    keyword = keyword.strip().lower()
    if not keyword:
        raise ValueError("keyword must not be blank")
    return keyword


@transaction.atomic
def blacklist_keyword_create(*, keyword: str, enabled: bool = True) -> BlacklistKeyword:
    record = BlacklistKeyword.objects.create(keyword=_normalise(keyword), enabled=enabled)
    transaction.on_commit(blacklist_invalidate)
    return record


@transaction.atomic
def blacklist_keyword_update(*, record: BlacklistKeyword, keyword: str, enabled: bool) -> BlacklistKeyword:
    record.keyword = _normalise(keyword)
    record.enabled = enabled
    record.save(update_fields=["keyword", "enabled", "updated_at"])
    transaction.on_commit(blacklist_invalidate)
    return record


@transaction.atomic
def blacklist_keyword_delete(*, record: BlacklistKeyword) -> None:
    record.delete()
    transaction.on_commit(blacklist_invalidate)
