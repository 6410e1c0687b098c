"""Token-bucket limits in real Redis: a burst of `limit`, then one hit per window/limit, on Redis's clock; the
Retry-After is the exact wait for the next hit (not the end of a clock-aligned window), and a hit refused by
one bucket of a call spends none of the others."""

from __future__ import annotations

import pytest

from items.ratelimit import Limit, RateLimitUnavailable, buckets_clear, buckets_hit


def test_a_burst_then_an_honest_wait(redis_client):
    bucket = [Limit("ten-a-minute", "ratelimit:test:{a}:one", 10, 60)]
    assert all(buckets_hit(bucket, fail_open=False).allowed for _ in range(10))
    refused = buckets_hit(bucket, fail_open=False)
    assert not refused.allowed and refused.refused_by == "ten-a-minute"
    assert 5 <= refused.retry_after <= 6  # one hit comes back every 6 s, whatever the clock says
    assert 0 < redis_client.pttl("ratelimit:test:{a}:one") <= 60_000


def test_the_bucket_refills_as_time_passes(redis_client):
    key = "ratelimit:test:{b}:one"
    bucket = [Limit("two-an-hour", key, 2, 3600)]
    assert buckets_hit(bucket, fail_open=False).allowed and buckets_hit(bucket, fail_open=False).allowed
    assert buckets_hit(bucket, fail_open=False).retry_after > 1700
    # Half an hour later (the stored arrival time moved back by 1800 s), exactly one hit is back.
    redis_client.set(key, int(redis_client.get(key)) - 1_800_000, px=3_600_000)
    assert buckets_hit(bucket, fail_open=False).allowed
    assert not buckets_hit(bucket, fail_open=False).allowed


def test_a_refusal_spends_nothing_and_names_the_longest_wait(redis_client):
    small = Limit("small", "ratelimit:test:{c}:small", 1, 60)
    large = Limit("large", "ratelimit:test:{c}:large", 5, 3600)
    assert buckets_hit([small, large], fail_open=False).allowed
    refused = buckets_hit([small, large], fail_open=False)
    assert refused.refused_by == "small"
    # The refused hit did not spend `large`: four more fit there (alone).
    assert all(buckets_hit([large], fail_open=False).allowed for _ in range(4))
    assert buckets_hit([small, large], fail_open=False).refused_by == "large"  # 720 s beats small's 60 s
    assert buckets_clear([small.key, large.key]) == 2
    assert buckets_hit([small, large], fail_open=False).allowed


def test_peek_and_add(redis_client):
    bucket = [Limit("failures", "ratelimit:test:{d}:f", 2, 60)]
    for _ in range(2):
        assert buckets_hit(bucket, mode="peek", fail_open=False).allowed
        buckets_hit(bucket, mode="add", fail_open=False)
    assert not buckets_hit(bucket, mode="peek", fail_open=False).allowed


def test_zero_disables_and_redis_down_fails_as_asked(settings):
    assert buckets_hit([Limit("off", "ratelimit:test:{e}", 0, 60)], fail_open=False).allowed
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    bucket = [Limit("on", "ratelimit:test:{e}", 1, 60)]
    assert buckets_hit(bucket, fail_open=True).allowed
    with pytest.raises(RateLimitUnavailable):
        buckets_hit(bucket, fail_open=False)
