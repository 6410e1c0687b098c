"""Key names: every key one Lua script or MULTI touches lands in one Redis Cluster slot (no CROSSSLOT)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from redis.crc import key_slot

from eigenflux.base.redis import cluster_client, is_cluster_url, slot_tag
from items.events import STREAM_ITEM_EVENTS, STREAM_ITEM_PUBLISH, STREAM_ITEM_STATS, STREAM_PROFILE_UPDATE
from pipeline.relay import once_mark_key
from pipeline.streams import dlq_stream


def slot(key: str) -> int:
    return key_slot(key.encode())


@pytest.mark.parametrize("stream", [STREAM_ITEM_PUBLISH, STREAM_ITEM_EVENTS, STREAM_PROFILE_UPDATE, STREAM_ITEM_STATS])
def test_a_stream_its_dead_letters_seen_index_and_once_marks_share_a_slot(stream):
    dlq = dlq_stream(stream)
    assert dlq == f"{{{stream}}}:dlq"
    assert {slot(stream), slot(dlq), slot(f"{dlq}:seen"), slot(once_mark_key(stream, "e-1"))} == {slot(stream)}
    # A dead-letter stream's own dead letters (older versions) keep the tag instead of nesting braces.
    assert dlq_stream(dlq) == f"{dlq}:dlq" and slot(dlq_stream(dlq)) == slot(stream)


def test_slot_tag_follows_redis_rules():
    assert slot_tag("a{b}c") == "b"
    assert slot_tag("a{}c") == "a{}c"  # an empty tag hashes the whole key
    assert slot_tag("a{b") == "a{b"
    assert slot_tag("{x}{y}") == "x"


def test_official_budget_counters_share_a_slot():
    from pipeline.official import budget_keys

    hour, day = budget_keys(42, 1_800_000_000)
    assert slot(hour) == slot(day)


def test_cluster_urls_are_recognised_and_bad_ones_named():
    assert is_cluster_url("redis+cluster://a:1,b:2")
    assert is_cluster_url("redis://a:1/0", flag=True)
    assert not is_cluster_url("redis://a:1/0")
    with pytest.raises(ImproperlyConfigured, match="not host:port"):
        cluster_client("redis+cluster://127.0.0.1:7160,nohost")
    with pytest.raises(ImproperlyConfigured, match="only database 0"):
        cluster_client("redis+cluster://127.0.0.1:7160/3")
    with pytest.raises(ImproperlyConfigured, match="unix://"):
        cluster_client(
            "unix:///tmp/redis.sock",
        )


@pytest.mark.slow
def test_a_cluster_without_plain_redis_for_rq_and_channels_is_refused_at_start():
    import os
    import subprocess
    import sys

    env = {**os.environ, "REDIS_URL": "redis+cluster://127.0.0.1:7160", "DJANGO_SETTINGS_MODULE": "eigenflux.settings"}
    env.pop("RQ_REDIS_URL", None)
    env.pop("CHANNEL_REDIS_URLS", None)
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert "set RQ_REDIS_URL" in result.stderr and "CHANNEL_REDIS_URLS" in result.stderr
