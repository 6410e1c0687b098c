"""The runtime's Lua scripts against real Redis: heartbeat, ownership-checked ACK, dead-letter (with its archive
group and its bounded `seen` index), letters of entries that are not UTF-8, delivery-count setting."""

from __future__ import annotations

import base64
import json

import pytest

from eigenflux.base.redis import get_redis
from pipeline.runtime.dead_lettering import dead_letter
from pipeline.runtime.entries import UndecodableEntry, decode_fields
from pipeline.runtime.scripts import Scripts
from pipeline.streams import dlq_stream
from tests.pipeline.runtime.conftest import envelope

STREAM, GROUP = "test:scripts", "cg:test"


def read_as(client, consumer, count=10):
    response = client.xreadgroup(GROUP, consumer, {STREAM: ">"}, count=count)
    return [mid for mid, _ in response[0][1]] if response else []


def setup_stream(client, n=3):
    client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    return [client.xadd(STREAM, envelope(seq=i)) for i in range(n)]


def pending(client, message_id):
    return client.xpending_range(STREAM, GROUP, message_id, message_id, 1)[0]


def test_heartbeat_resets_idle_without_counting_a_delivery(redis_client):
    ids = setup_stream(redis_client)
    read_as(redis_client, "owner")
    scripts = Scripts(redis_client)
    redis_client.execute_command("XCLAIM", STREAM, GROUP, "owner", 0, ids[0], "IDLE", 60_000, "JUSTID")
    assert pending(redis_client, ids[0])["time_since_delivered"] >= 60_000

    lost = scripts.heartbeat(keys=[STREAM], args=[GROUP, "owner", ids[0], ids[1]])

    assert lost == []
    entry = pending(redis_client, ids[0])
    assert entry["time_since_delivered"] < 1000
    assert entry["times_delivered"] == 1
    assert entry["consumer"] == "owner"


def test_heartbeat_reports_stolen_entries_and_does_not_take_them_back(redis_client):
    ids = setup_stream(redis_client)
    read_as(redis_client, "owner")
    redis_client.xclaim(STREAM, GROUP, "thief", 0, [ids[1]])

    lost = Scripts(redis_client).heartbeat(keys=[STREAM], args=[GROUP, "owner", *ids])

    assert lost == [ids[1]]
    assert pending(redis_client, ids[1])["consumer"] == "thief"


def test_ack_only_acknowledges_owned_entries_in_one_call(redis_client):
    ids = setup_stream(redis_client)
    read_as(redis_client, "owner")
    redis_client.xclaim(STREAM, GROUP, "thief", 0, [ids[2]])

    lost = Scripts(redis_client).ack(keys=[STREAM], args=[GROUP, "owner", *ids])

    assert lost == [ids[2]]
    left = redis_client.xpending_range(STREAM, GROUP, "-", "+", 10)
    assert [(p["message_id"], p["consumer"]) for p in left] == [(ids[2], "thief")]


def test_dead_letter_twice_writes_one_entry(redis_client):
    ids = setup_stream(redis_client, 1)
    read_as(redis_client, "owner")
    fields = redis_client.xrange(STREAM)[0][1]
    kwargs = {
        "stream": STREAM,
        "group": GROUP,
        "consumer": "owner",
        "message_id": ids[0],
        "fields": fields,
        "delivery_count": 3,
        "error_class": "transient",
        "error": "boom",
    }

    first = dead_letter(redis_client, **kwargs)
    second = dead_letter(redis_client, **kwargs)

    assert first and second == ""
    letters = redis_client.xrange(dlq_stream(STREAM))
    assert len(letters) == 1
    letter = letters[0][1]
    assert letter["stream"] == STREAM and letter["group"] == GROUP and letter["message_id"] == ids[0]
    assert (letter["delivery_count"], letter["error_class"], letter["error"]) == ("3", "transient", "boom")
    assert letter["event_id"] == fields["id"] and letter["failed_at"].endswith("Z")
    assert json.loads(letter["payload"])["id"] == fields["id"]
    assert redis_client.xpending(STREAM, GROUP)["pending"] == 0


def test_dead_letter_needs_ownership(redis_client):
    ids = setup_stream(redis_client, 1)
    read_as(redis_client, "owner")
    result = dead_letter(
        redis_client,
        stream=STREAM,
        group=GROUP,
        consumer="intruder",
        message_id=ids[0],
        fields={},
        delivery_count=1,
        error_class="permanent",
        error="x",
    )
    assert result is None
    assert redis_client.xlen(dlq_stream(STREAM)) == 0
    assert redis_client.xpending(STREAM, GROUP)["pending"] == 1


def test_dead_letter_payload_is_truncated_but_valid_json(redis_client):
    ids = setup_stream(redis_client, 1)
    read_as(redis_client, "owner")
    fields = {f"f{i}": "x" * 5000 for i in range(20)}
    dead_letter(
        redis_client,
        stream=STREAM,
        group=GROUP,
        consumer="owner",
        message_id=ids[0],
        fields=fields,
        delivery_count=1,
        error_class="permanent",
        error="e" * 10_000,
    )
    letter = redis_client.xrange(dlq_stream(STREAM))[0][1]
    assert len(letter["payload"]) < 10_000 and json.loads(letter["payload"])["_truncated"] == "1"
    assert len(letter["error"]) == 2000


def test_a_dead_letter_stream_is_born_with_its_archive_group(redis_client):
    ids = setup_stream(redis_client, 1)
    read_as(redis_client, "owner")
    dead_letter(
        redis_client,
        stream=STREAM,
        group=GROUP,
        consumer="owner",
        message_id=ids[0],
        fields=redis_client.xrange(STREAM)[0][1],
        delivery_count=1,
        error_class="permanent",
        error="x",
    )
    [group] = redis_client.xinfo_groups(dlq_stream(STREAM))
    assert (group["name"], group["last-delivered-id"]) == ("cg:dlq:archive", "0-0")  # it will read the letter


def test_the_seen_index_forgets_old_members_and_replaces_an_old_plain_set(redis_client):
    seen = dlq_stream(STREAM) + ":seen"
    redis_client.sadd(seen, "legacy|1-0")  # what an older version kept, forever
    ids = setup_stream(redis_client, 2)
    read_as(redis_client, "owner")
    kwargs = {"stream": STREAM, "group": GROUP, "consumer": "owner", "fields": {}, "delivery_count": 1}
    dead_letter(redis_client, message_id=ids[0], error_class="permanent", error="x", **kwargs)
    assert redis_client.type(seen) == "zset"
    assert redis_client.zrange(seen, 0, -1) == [f"{GROUP}|{ids[0]}"]
    redis_client.zadd(seen, {f"{GROUP}|ancient": 1000.0})  # dead-lettered in 1970
    dead_letter(redis_client, message_id=ids[1], error_class="permanent", error="x", **kwargs)
    assert sorted(redis_client.zrange(seen, 0, -1)) == sorted([f"{GROUP}|{ids[0]}", f"{GROUP}|{ids[1]}"])


def test_an_undecodable_entry_is_dead_lettered_with_its_bytes_in_base64(redis_client, settings):
    raw_client = get_redis(settings.REDIS_URL, raw=True)
    redis_client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    fields = {b"id": b"e1", b"subject": b"\xffbad", b"data": b"{\x00\xfe}"}
    message_id = raw_client.xadd(STREAM, fields).decode()
    raw_client.xreadgroup(GROUP, "owner", {STREAM: ">"})
    [(_, raw)] = raw_client.xrange(STREAM)
    with pytest.raises(UndecodableEntry, match=r"field 'subject' is not UTF-8 .*byte 0xff at position 0"):
        decode_fields(raw)

    dead_letter(
        raw_client,
        stream=STREAM,
        group=GROUP,
        consumer="owner",
        message_id=message_id,
        fields=None,
        raw=raw,
        delivery_count=1,
        error_class="permanent",
        error="malformed: not UTF-8",
    )

    letter = redis_client.xrange(dlq_stream(STREAM))[0][1]  # the letter itself is valid UTF-8
    assert letter["subject"] == "\\xffbad" and letter["event_id"] == "e1"
    payload = json.loads(letter["payload"])
    assert payload["_encoding"] == "base64"
    assert {base64.b64decode(k): base64.b64decode(v) for k, v in payload["_fields"]} == fields
