"""The docs name events as they are sent: every event type README.md and docs/*.md write in code is a type of
items/events.py (as on the streams and, for outcomes and milestones, on the WebSocket) or the socket-only
`item.matched` push, never a shortened name such as `item.completed` that nothing sends."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from items import events
from items.events_socket import matched_message, outcome_message

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# A code span that reads as an event type: `item.completed`, `io.eigenflux.item.completed.v1`, `profile.updated`...
EVENT_LIKE = re.compile(r"`((?:io\.eigenflux\.)?(?:item|profile|feed|agent)\.[a-z_]+(?:\.[a-z_]+)*(?:\.v\d+)?)`")

STREAM_TYPES = {value for name, value in vars(events).items() if name.isupper() and str(value).startswith("io.")}
SOCKET_ONLY = {matched_message(event_id="e", item_id=1, score=1.0, side="seeks", time="t")["event"]["type"]}


def event_names(page: Path) -> list[str]:
    return EVENT_LIKE.findall(page.read_text())


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_event_type_a_page_names_is_one_that_is_sent(page: Path):
    assert [name for name in event_names(page) if name not in STREAM_TYPES | SOCKET_ONLY] == []


def test_the_socket_sends_outcomes_under_the_stream_type_and_the_match_push_under_its_own():
    envelope = {"id": "e", "type": events.ITEM_COMPLETED, "time": "t"}
    assert outcome_message(envelope, {"item_id": 1, "status": "completed"})["event"]["type"] == events.ITEM_COMPLETED
    assert {"item.matched"} == SOCKET_ONLY


def test_a_shortened_name_is_caught(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("The socket sends `item.completed`, `io.eigenflux.item.held.v1` and `item.matched`.\n")
    assert [name for name in event_names(page) if name not in STREAM_TYPES | SOCKET_ONLY] == ["item.completed"]
