"""Test harness: real PostgreSQL (pytest-django's test database) and real Redis (a dedicated db, flushed
per test). Both are the embedded servers unless DATABASE_URL / REDIS_URL are set."""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest
from django.test import Client

from eigenflux.redis import get_redis
from eigenflux.settings import channel_layers

# Shared fixtures live beside the fakes they drive (e.g. the OpenAI-compatible fake server).
pytest_plugins = ["tests.fakes.fixtures"]

# Redis logical database for tests; parallel runs against one server can choose different ones.
TEST_REDIS_DB = int(os.environ.get("TEST_REDIS_DB", "15"))


def redis_url_with_db(url: str, db: int) -> str:
    parts = urlsplit(url)
    if parts.scheme == "unix":
        query = dict(parse_qsl(parts.query))
        query["db"] = str(db)
        return f"unix://{parts.path}?{urlencode(query)}"
    return urlunsplit(parts._replace(path=f"/{db}"))


@pytest.fixture(autouse=True)
def _redis_isolated(settings):
    """Every test gets an empty Redis database of its own, by URL, so subprocesses can use it too."""
    url = redis_url_with_db(settings.REDIS_URL, TEST_REDIS_DB)
    settings.REDIS_URL = url
    settings.RQ_QUEUES = {"default": {"URL": url, "DEFAULT_TIMEOUT": 300}}
    settings.CHANNEL_LAYERS = channel_layers([url])
    client = get_redis(url)
    client.flushdb()
    yield client
    client.flushdb()


@pytest.fixture(autouse=True)
def _auth_caches_cleared():
    """The in-process memory of unknown tokens and blocked addresses starts empty in every test."""
    from items.authentication import unknown_tokens
    from items.ratelimit import blocked_addresses_clear

    unknown_tokens.clear()
    blocked_addresses_clear()
    yield
    unknown_tokens.clear()
    blocked_addresses_clear()


@pytest.fixture
def redis_client(_redis_isolated):
    return _redis_isolated


@pytest.fixture
def agent_and_token(db):
    from tests.factories import make_agent

    return make_agent()


@pytest.fixture
def api_client(agent_and_token) -> Client:
    """A test client that sends the agent's bearer token on every request."""
    _, token = agent_and_token
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")
