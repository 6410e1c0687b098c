"""The process's model clients (pipeline.llm.clients): the SDK's aiohttp transport by default, one client per
settings tuple however many threads ask at once, the oldest closed past the cap, all closed at exit."""

from __future__ import annotations

import threading
import time

import openai
import pytest

from pipeline.llm import clients, extract_item
from pipeline.llm.clients import client_config, openai_client

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_clients_left():
    clients.close_all()
    yield
    clients.close_all()


def wait_closed(client: openai.AsyncOpenAI) -> bool:
    deadline = time.monotonic() + 5
    while not client.is_closed() and time.monotonic() < deadline:
        time.sleep(0.02)
    return client.is_closed()


def test_the_default_transport_is_the_sdks_aiohttp_one(fake_llm, settings):
    client = openai_client(client_config("main"))
    assert isinstance(client._client, openai.DefaultAioHttpClient)
    assert extract_item(content="Offering GPU hours in Berlin.").value.broadcast_type == "supply"
    settings.LLM_HTTP_CLIENT = "httpx"
    other = openai_client(client_config("main"))
    assert other is not client and not isinstance(other._client, openai.DefaultAioHttpClient)
    assert isinstance(other._client, openai.DefaultAsyncHttpxClient)


def test_threads_asking_at_once_share_one_client(fake_llm):
    config = client_config("main")
    start = threading.Barrier(24)
    made: list[openai.AsyncOpenAI] = []

    def ask() -> None:
        start.wait()
        made.append(openai_client(config))

    threads = [threading.Thread(target=ask) for _ in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 24 and len({id(client) for client in made}) == 1


def test_past_the_cap_the_oldest_client_is_closed(fake_llm, settings):
    first = openai_client(client_config("main"))
    extract_item(content="hello")  # its session and connections exist
    for n in range(clients.MAX_CLIENTS):
        settings.LLM_API_KEY = f"sk-other-{n}"
        openai_client(client_config("main"))
    assert wait_closed(first)
    settings.LLM_API_KEY = "sk-other-0"  # still cached: the most recent ones are kept
    assert not openai_client(client_config("main")).is_closed()


def test_close_all_closes_every_client(fake_llm):
    client = openai_client(client_config("main"))
    extract_item(content="hello")
    clients.close_all()
    assert client.is_closed()
    assert openai_client(client_config("main")) is not client
