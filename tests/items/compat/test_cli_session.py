"""Replays a session recorded from the real EigenFlux CLI (data/cli_session.json) against the running live
test server, in order, with the real pipeline (local analyzer) run where the recorded session had it
running: every answer must have the recorded status and the recorded shape (envelope, names, types).

Ids, challenge ids, tokens and impression ids differ between the recording and the replay: they are learnt
from each answer (recorded value -> replayed value) and substituted into the later requests; login codes
come from the test mailbox."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from django.core import mail
from django.db import connection

from items.feed_ranking import SIGNALS
from tests.factories import mailed_login_code
from tests.items.compat.shapes import assert_same_shape
from tests.pipeline.runtime.fixtures import pipeline_env, run_pipeline  # noqa: F401 - fixtures

SESSION = json.loads((Path(__file__).parent / "data" / "cli_session.json").read_text(encoding="utf-8"))
LEARNT_KEYS = {
    "item_id",
    "agent_id",
    "group_id",
    "author_agent_id",
    "challenge_id",
    "impression_id",
    "access_token",
    "notification_id",
    "next_cursor",
    "duplicate_of_item_id",
}
CONSUMER_NAMES = ("item-publish", "item-stats", "profile-update", "official-welcome", "official-firstbroadcast")
ALL_CONSUMERS = ",".join(
    f"pipeline.consumers.{name}"
    for name in ("item_publish", "item_stats", "profile_update", "official_welcome", "official_firstbroadcast")
)


def learn(recorded: object, actual: object, mapping: dict[str, str]) -> None:
    if isinstance(recorded, dict) and isinstance(actual, dict):
        for key, value in recorded.items():
            if key in actual:
                if key in LEARNT_KEYS and isinstance(value, str) and isinstance(actual[key], str):
                    mapping.setdefault(value, actual[key])
                learn(value, actual[key], mapping)
    elif isinstance(recorded, list) and isinstance(actual, list):
        for old, new in zip(recorded, actual, strict=False):
            learn(old, new, mapping)


ID_QUERY_KEYS = {"last_item_id", "cursor"}


def substitute_path(path: str, mapping: dict[str, str]) -> str:
    """Ids in the path (/items/<id>) and in id-valued query parameters; never limits or actions."""
    parts = urlsplit(path)
    segments = [mapping.get(segment, segment) if segment.isdigit() else segment for segment in parts.path.split("/")]
    query = [
        (key, mapping.get(value, value) if key in ID_QUERY_KEYS else value) for key, value in parse_qsl(parts.query)
    ]
    return "/".join(segments) + (f"?{urlencode(query)}" if query else "")


def substitute_body(body: object, mapping: dict[str, str], key: str = "") -> object:
    """Values of id-valued keys only (a score of 2 is not item 2)."""
    if isinstance(body, dict):
        return {name: substitute_body(value, mapping, name) for name, value in body.items()}
    if isinstance(body, list):
        return [substitute_body(value, mapping, key) for value in body]
    if key not in LEARNT_KEYS:
        return body
    if isinstance(body, str):
        return mapping.get(body, body)
    if isinstance(body, int) and not isinstance(body, bool) and str(body) in mapping:
        return int(mapping[str(body)])  # a numeric item id, as `feed feedback` may send one
    return body


@pytest.mark.slow
def test_recorded_cli_session_replays_with_the_same_shapes(live_compat, run_pipeline, settings):  # noqa: F811
    settings.EIGENFLUX_OPEN_SIGNUP = True  # the recording signed both agents up
    # The recording's feed served its two items newest first (then a ranking without relevance signals): freshness
    # alone reproduces that order, which the shapes are compared in (the ranking has tests of its own).
    for name in SIGNALS:
        if name != "freshness":
            setattr(settings, f"FEED_WEIGHT_{name.upper()}", 0.0)
    with connection.cursor() as cursor:  # ids unlike the recorded ones, so every id must be substituted
        for table in ("items_agent", "items_rawitem", "items_message"):
            cursor.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'), 7000 + (random() * 1000)::int)", [table])
    tokens: dict[str, str] = {}
    mapping: dict[str, str] = {}
    for exchange in SESSION["exchanges"]:
        step = f"step {exchange['step']}: {exchange['method']} {exchange['path']}"
        body = substitute_body(exchange["body"], mapping)
        if exchange["path"] == "/auth/login/verify" and exchange["response"]["code"] == 0:
            body["code"] = mailed_login_code(mail.outbox[-1])
        client = live_compat(tokens.get(exchange["actor"]) if exchange["actor"] else None)
        headers = {"X-Client-Host": exchange["client_host"]} if exchange["client_host"] else {}
        status, answer, _ = client.call(exchange["method"], substitute_path(exchange["path"], mapping), body, **headers)
        assert status == exchange["status"], f"{step}: {answer}"
        try:
            assert_same_shape(answer, exchange["response"])
        except AssertionError as exc:
            raise AssertionError(f"{step}\n{exc}\nanswer: {answer}") from None
        learn(exchange["response"], answer, mapping)
        data = answer.get("data") or {}
        if "access_token" in data:
            tokens["bob" if tokens else "alice"] = data["access_token"]  # alice logs in first
        if exchange.get("then_run_pipeline"):
            consumers = [("--consumer", name) for name in CONSUMER_NAMES]
            process = run_pipeline(
                "--burst",
                *[arg for pair in consumers for arg in pair],
                env={"PIPELINE_EXTRA_CONSUMER_MODULES": ALL_CONSUMERS, "LLM_PROVIDER": "local"},
            )
            assert process.wait(120) == 0, process.output()[-4000:]
    assert set(tokens) == {"alice", "bob"}
