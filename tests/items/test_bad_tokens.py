"""Bad tokens are cheap to refuse (issue: made-up `ef_` tokens reached the database on every request):
malformed ones cost no query, an unknown one one query per AUTH_NEGATIVE_CACHE_SECONDS, and failures are
rate limited per client address (X-Forwarded-For believed only from TRUSTED_PROXIES)."""

from __future__ import annotations

import secrets

import pytest
from django.test import Client

from eigenflux.base.clientaddr import client_address
from items.tokens import token_generate, token_well_formed
from tests.factories import make_agent

ME = "/api/v1/agents/me"


def get(token: str | None, address: str = "203.0.113.7", **headers):
    extra = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token is not None else {}
    return Client(REMOTE_ADDR=address).get(ME, **extra, **headers)


@pytest.mark.parametrize(
    "token",
    ["garbage", "ef_", "ef_short", "ef_" + "a" * 42, "ef_" + "a" * 44, "ef_" + "a" * 42 + "!", "xx_" + "a" * 43],
)
def test_a_malformed_token_costs_no_query(db, django_assert_num_queries, token):
    assert not token_well_formed(token)
    with django_assert_num_queries(0):
        assert get(token).status_code == 401


def test_generated_tokens_are_well_formed():
    assert all(token_well_formed(token_generate()) for _ in range(200))


def test_an_unknown_token_costs_one_query_and_then_none(db, django_assert_num_queries):
    token = token_generate()
    with django_assert_num_queries(1):
        assert get(token).status_code == 401
    for _ in range(3):
        with django_assert_num_queries(0):
            assert get(token).status_code == 401


def test_the_negative_cache_expires(db, settings, django_assert_num_queries):
    settings.AUTH_NEGATIVE_CACHE_SECONDS = 0  # not remembered at all
    token = token_generate()
    for _ in range(2):
        with django_assert_num_queries(1):
            assert get(token).status_code == 401


def test_a_revoked_token_is_refused(db):
    from items.services.agents import agent_token_revoke

    agent, token = make_agent()
    assert get(token).status_code == 200
    agent_token_revoke(token=agent.tokens.get())
    assert get(token).status_code == 401


def test_failures_per_address_are_limited_and_then_cost_nothing(db, settings, django_assert_num_queries):
    settings.RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE = 3
    for _ in range(3):
        assert get("garbage").status_code == 401
    limited = get(token_generate())
    assert limited.status_code == 429
    assert limited.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(limited["Retry-After"]) <= 61
    # Blocked: even a fresh well-formed token is refused without a database lookup or a Redis round trip.
    with django_assert_num_queries(0):
        assert get(token_generate()).status_code == 429
    # Another address is unaffected, and a valid agent there is served.
    _, token = make_agent()
    assert get(token, address="198.51.100.9").status_code == 200
    assert get("garbage", address="198.51.100.9").status_code == 401


def test_failures_count_per_ipv6_64_not_per_address(db, settings):
    """Issue 44, the /64 grouping end to end: a host holds its whole /64, so each of its addresses is not a new
    budget of bad tokens; the next /64 is another client."""
    settings.RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE = 3
    for n in range(3):
        assert get("garbage", address=f"2001:db8:1:2::{n + 1:x}").status_code == 401
    assert get("garbage", address="2001:db8:1:2:ffff::9").status_code == 429
    assert get("garbage", address="2001:db8:1:3::1").status_code == 401


def test_a_missing_authorization_header_counts_as_a_failure(db, settings):
    settings.RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE = 2
    assert get(None).status_code == 401
    assert get(None).status_code == 401
    assert get(None).status_code == 429


def test_the_limit_is_shared_by_processes_through_redis(db, settings):
    """A second process (here: the in-process memory wiped) learns from the shared counter at its first failure."""
    from items.ratelimit import blocked_addresses_clear

    settings.RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE = 2
    for _ in range(2):
        assert get("garbage").status_code == 401
    blocked_addresses_clear()
    assert get("garbage").status_code == 429


def test_forwarded_for_is_ignored_unless_the_peer_is_a_trusted_proxy(db, settings):
    settings.RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE = 2
    for n in range(2):  # spoofed header, untrusted peer: both count against the peer
        assert get("garbage", address="192.0.2.1", HTTP_X_FORWARDED_FOR=f"10.9.9.{n}").status_code == 401
    assert get("garbage", address="192.0.2.1", HTTP_X_FORWARDED_FOR="10.9.9.99").status_code == 429

    settings.TRUSTED_PROXIES = ["192.0.2.0/24"]
    for n in range(2):  # through our proxy: each forwarded client has its own budget
        assert get("garbage", address="192.0.2.50", HTTP_X_FORWARDED_FOR=f"10.8.8.{n}").status_code == 401
    assert get("garbage", address="192.0.2.50", HTTP_X_FORWARDED_FOR="10.8.8.0").status_code == 401
    assert get("garbage", address="192.0.2.50", HTTP_X_FORWARDED_FOR="10.8.8.0").status_code == 429


@pytest.mark.parametrize(
    ("peer", "forwarded", "trusted", "expected"),
    [
        ("198.51.100.1", None, [], "198.51.100.1"),
        ("198.51.100.1", "1.2.3.4", [], "198.51.100.1"),  # nobody trusted: the header is ignored
        ("10.0.0.5", "1.2.3.4", ["10.0.0.0/8"], "1.2.3.4"),
        ("10.0.0.5", "6.6.6.6, 1.2.3.4", ["10.0.0.0/8"], "1.2.3.4"),  # the client can prepend anything
        ("10.0.0.5", "1.2.3.4, 10.0.0.9", ["10.0.0.0/8"], "1.2.3.4"),  # two proxies of ours
        ("10.0.0.5", "not-an-ip, 10.0.0.9", ["10.0.0.0/8"], "10.0.0.9"),
        ("10.0.0.5", "2001:db8::1", ["10.0.0.5"], "2001:db8::1"),
        ("198.51.100.1", "1.2.3.4", ["10.0.0.0/8"], "198.51.100.1"),  # peer not a proxy of ours
        # Proxies that write the client's port too (issue 44's own pass): the address is still the client's.
        ("10.0.0.5", "1.2.3.4:4711", ["10.0.0.0/8"], "1.2.3.4"),
        ("10.0.0.5", "[2001:db8::1]:4711", ["10.0.0.0/8"], "2001:db8::1"),
        ("10.0.0.5", "[2001:db8::1]", ["10.0.0.0/8"], "2001:db8::1"),
        ("10.0.0.5", "6.6.6.6, 1.2.3.4:4711, 10.0.0.9:80", ["10.0.0.0/8"], "1.2.3.4"),
        ("10.0.0.5", "1.2.3.4:port", ["10.0.0.0/8"], "10.0.0.5"),
    ],
)
def test_client_address(settings, peer, forwarded, trusted, expected):
    settings.TRUSTED_PROXIES = trusted
    assert client_address(peer, forwarded) == expected


def test_a_bad_trusted_proxies_entry_is_named(settings):
    from django.core.exceptions import ImproperlyConfigured

    settings.TRUSTED_PROXIES = ["10.0.0.0/8", "proxy.local"]
    with pytest.raises(ImproperlyConfigured, match=r"proxy\.local"):
        client_address("10.0.0.1", "1.2.3.4")


def test_random_well_formed_tokens_are_each_looked_up_once_until_the_address_is_blocked(
    db, settings, django_assert_max_num_queries
):
    settings.RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE = 5
    # The 6th failure is the one whose count shows the address over the limit: it was looked up too.
    with django_assert_max_num_queries(num=6):
        codes = [get("ef_" + secrets.token_urlsafe(32)).status_code for _ in range(20)]
    assert codes == [401] * 5 + [429] * 15
