"""The review queue in the real browser (a part of tests/e2e/browser_check.py, run by hand): the seeded held items are
listed, and the keys work — a approves the highlighted row, r asks for a reason and Enter rejects."""

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
