"""Model calls wait on one event loop per process: many in flight without a thread each, cancelled at once
through the lease's event, embeddings read as base64."""

from __future__ import annotations

import base64
import struct
import threading

import pytest
from django.db import connection

from pipeline.llm import CallCancelled, ModelOutputInvalid, embed, safety_check
from pipeline.llm.calls import decode_vector
from pipeline.models import LLMCall
from pipeline.runtime.event import Lease
from tests.fakes.openai_server import DEFAULT_REPLIES, Reply, hashed_embedding

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.slow
def test_a_hundred_calls_are_in_flight_at_once_without_a_thread_each(fake_llm):
    """The old call layer ran each request on a pool of 64 threads: never more than 64 in flight."""
    callers = 100
    safety_check(content="warm-up")  # the model loop and its client exist before the baseline is taken
    fake_llm.server.gate = (callers, 4.0)  # no reply until all 100 requests are open at once (LLM_TIMEOUT 5 s)
    fake_llm.server.max_in_flight = 0
    before = {t.ident for t in threading.enumerate()}
    errors: list[BaseException] = []
    seen_threads: list[int] = []

    def call() -> None:
        try:
            safety_check(content="hello", cancel=Lease().cancelled)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()  # the thread's pooled connection (its LLMCall row) goes back

    def watch_threads() -> None:
        while len(threads) and any(t.is_alive() for t in threads):
            new = [
                t
                for t in threading.enumerate()
                if t.ident not in before and t not in threads and t is not watcher
                if "process_request_thread" not in t.name  # the fake server's own handler threads
            ]
            seen_threads.append(len(new))
            threading.Event().wait(0.01)

    threads = [threading.Thread(target=call) for _ in range(callers)]
    watcher = threading.Thread(target=watch_threads)
    for thread in threads:
        thread.start()
    watcher.start()
    for thread in threads:
        thread.join(60)
    watcher.join(10)
    assert not errors, errors[:3]
    assert fake_llm.server.max_in_flight == callers
    assert max(seen_threads, default=0) == 0  # no thread per call, none for the waiting
    assert LLMCall.objects.filter(prompt="safety", outcome="ok").count() == callers + 1


def test_losing_the_lease_aborts_a_request_before_its_reply(fake_llm):
    fake_llm.script("safety", Reply(DEFAULT_REPLIES["safety"], delay=5.0))
    lease = Lease()
    received = threading.Event()

    def lose_once_received() -> None:
        while fake_llm.server.in_flight < 1:
            threading.Event().wait(0.005)
        received.set()
        lease.lose()  # the runtime's lease event calls back: no polling of the event

    threading.Thread(target=lose_once_received, daemon=True).start()
    with pytest.raises(CallCancelled):
        safety_check(content="hello", cancel=lease.cancelled)
    assert received.is_set()
    (request,) = fake_llm.requests_for("safety")
    assert request.status == 0  # not answered: cancelled while the server was still working on the reply
    assert list(LLMCall.objects.values_list("outcome", flat=True)) == ["cancelled"]


def test_embeddings_are_requested_as_base64_and_decoded(fake_llm, settings):
    settings.EMBEDDING_DIMENSIONS = 8
    answer = embed(["alpha"])
    (request,) = fake_llm.requests_for("embed")
    assert request.json["encoding_format"] == "base64"
    expected = list(struct.unpack("<8f", struct.pack("<8f", *hashed_embedding("alpha", 8))))
    assert answer.value == [expected]


def test_an_undecodable_embedding_is_invalid_output():
    assert decode_vector(base64.b64encode(struct.pack("<2f", 0.5, -1.0)).decode()) == [0.5, -1.0]
    assert decode_vector([1, 2.5]) == [1.0, 2.5]  # a server that ignores encoding_format
    with pytest.raises(ModelOutputInvalid, match="not base64"):
        decode_vector("not base64!")
    with pytest.raises(ModelOutputInvalid, match="not base64"):
        decode_vector(base64.b64encode(b"abc").decode())  # not a whole number of float32s
    with pytest.raises(ModelOutputInvalid, match="neither base64 nor"):
        decode_vector({"x": 1})
