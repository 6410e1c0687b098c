"""The review queue in the real browser (a part of tests/e2e/browser_check.py, run by hand): the seeded held items are
listed, and the keys work — a approves the highlighted row, r asks for a reason and Enter rejects. Also a held item's
page (its outcome says why, and no "safety pass") and a dead letter's page (its Requeue and Resolve buttons)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def review_queue(tools: Any, base: str, shot: Path) -> None:
    """The review queue by keyboard: a approves the highlighted row, r asks for a reason and Enter rejects."""
    from items.models import ItemStatus, ProcessedItem

    rows = "document.querySelectorAll('#review-table tr.ef-held').length"
    tools.open(f"{base}/admin/items/processeditem/review/")
    assert tools.evaluate(rows) == 2, "review queue"
    assert tools.evaluate("!!document.querySelector('#review-table tr.ef-current')"), "no row highlighted"
    tools.screenshot(shot)
    tools.evaluate("document.dispatchEvent(new KeyboardEvent('keydown', {key: 'a'}))")
    tools.wait_for(f"document.readyState === 'complete' && {rows} === 1")
    tools.evaluate("document.dispatchEvent(new KeyboardEvent('keydown', {key: 'r'}))")
    assert tools.evaluate("document.activeElement.id") == "review-reason", "r did not ask for the reason"
    tools.evaluate("document.getElementById('review-reason').value = 'a scam dressed as an offer'")
    key = "new KeyboardEvent('keydown', {key: 'Enter', bubbles: true})"
    tools.evaluate(f"document.getElementById('review-reason').dispatchEvent({key})")
    tools.wait_for(f"document.readyState === 'complete' && {rows} === 0")
    statuses = sorted(
        ProcessedItem.objects.filter(
            summary__in=["Members-only trading signal group", "GPU prices moving"]
        ).values_list("status", flat=True)
    )
    assert statuses == [ItemStatus.COMPLETED, ItemStatus.DISCARDED], statuses
    print("  review queue: approved with a, rejected with r + reason + Enter")


def item_outcome(tools: Any, base: str, pk: int, shot: Path) -> None:
    """A held item's page: its outcome says why in words, its safety verdict is not a pass, no field reads "-"."""
    tools.open(f"{base}/admin/items/processeditem/{pk}/change/")
    field = "(name) => (document.querySelector(`.field-${name} .readonly`) || {}).textContent || ''"
    held = tools.evaluate(f"({field})('held_because').trim()")
    assert held.startswith("safety uncertain: risk 0.48"), f"held item: {held!r}"
    assert tools.evaluate(f"({field})('safety_verdict').trim()") == "uncertain", "held item: safety verdict"
    dashes = "[...document.querySelectorAll('.readonly')].filter(f => f.textContent.trim() === '-').length"
    assert tools.evaluate(dashes) == 0, "held item: a field shown as '-'"
    tools.screenshot(shot)
    print(f"  held item: {held}")


def dead_letter_page(tools: Any, base: str, pk: int, shot: Path) -> None:
    """A dead letter's page: Requeue and Resolve buttons, enabled for a moderator."""
    tools.open(f"{base}/admin/pipeline/deadletter/{pk}/change/")
    buttons = (
        "[...document.querySelectorAll('#letter-actions button')]"
        ".map(b => b.textContent.trim() + (b.disabled ? ' (disabled)' : ''))"
    )
    labels = tools.evaluate(buttons)
    assert labels == ["Requeue", "Resolve…"], f"dead letter page: {labels}"
    tools.screenshot(shot)
