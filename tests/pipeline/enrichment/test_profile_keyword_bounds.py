"""Profile keyword extraction is bounded per agent: a burst of updates costs one model call that reads the
latest profile, and updates inside the interval schedule one later extraction instead of calling the model."""

from __future__ import annotations

import json

from django.test import Client
from django.utils import timezone

from items.events import STREAM_PROFILE_UPDATE
from items.models import OutboxEvent
from pipeline.consumers.profile_update import slot_key
from pipeline.housekeeping import outbox_backlog
from tests.factories import make_agent
from tests.pipeline.enrichment.test_official import MODULES


def update(token: str, bio: str) -> None:
    response = Client(HTTP_AUTHORIZATION=f"Bearer {token}").put(
        "/api/v1/agents/me", data=json.dumps({"bio": bio, "offers": "H100 hours"}), content_type="application/json"
    )
    assert response.status_code == 200


def burst(run_pipeline, fake_llm, *consumers: str, **env: str) -> str:
    args = ["--burst"]
    for name in consumers or ("profile-update",):
        args += ["--consumer", name]
    process = run_pipeline(*args, env={**fake_llm.env(), "PIPELINE_EXTRA_CONSUMER_MODULES": MODULES, **env})
    assert process.wait(90) == 0, process.output()[-4000:]
    return process.output()


def bio_sent(request) -> str:
    return request.json["input"].split("<<<BEGIN BIO>>>\n", 1)[1].split("\n<<<END BIO>>>", 1)[0]


def test_ten_updates_cost_one_extraction_of_the_latest_profile(run_pipeline, fake_llm):
    agent, token = make_agent()
    for n in range(10):
        update(token, f"I broker GPU capacity, version {n}")
    burst(run_pipeline, fake_llm)
    (request,) = fake_llm.requests_for("extract_keywords")
    assert bio_sent(request) == "I broker GPU capacity, version 9"
    agent.refresh_from_db()
    assert agent.profile_keywords == ["gpu rental", "inference"]
    assert agent.profile_keywords_version == agent.updated_at


def test_updates_inside_the_interval_schedule_one_later_extraction_of_the_latest_profile(
    run_pipeline, fake_llm, redis_client
):
    agent, token = make_agent()
    update(token, "first profile")
    burst(run_pipeline, fake_llm)
    assert [bio_sent(r) for r in fake_llm.requests_for("extract_keywords")] == ["first profile"]
    assert 0 < redis_client.ttl(slot_key(agent.pk)) <= 300  # PROFILE_KEYWORDS_MIN_INTERVAL_SECONDS

    update(token, "second profile")
    update(token, "third profile")
    burst(run_pipeline, fake_llm, "profile-update", "official-welcome")
    assert fake_llm.count("extract_keywords") == 1  # nothing called inside the interval
    (scheduled,) = OutboxEvent.objects.filter(stream=STREAM_PROFILE_UPDATE, dispatched_at__isnull=True)
    assert scheduled.envelope["targetgroup"] == "cg:profile:update"
    # Due just after the slot frees (the slot's TTL, in whole seconds, plus a one-second margin).
    slot_left = redis_client.ttl(slot_key(agent.pk))
    due_in = (scheduled.next_attempt_at - timezone.now()).total_seconds()
    assert slot_left - 1 <= due_in <= slot_left + 3
    assert outbox_backlog()[0] == 0  # scheduled for later: not a backlog

    # The end of the interval: the slot expires and the delayed event falls due.
    redis_client.delete(slot_key(agent.pk))
    OutboxEvent.objects.filter(pk=scheduled.pk).update(next_attempt_at=timezone.now())
    output = burst(run_pipeline, fake_llm, "profile-update", "official-welcome")
    assert [bio_sent(r) for r in fake_llm.requests_for("extract_keywords")] == ["first profile", "third profile"]
    agent.refresh_from_db()
    assert agent.profile_keywords_version == agent.updated_at
    assert "Traceback" not in output


def test_no_interval_means_no_bound(run_pipeline, fake_llm):
    _, token = make_agent()
    update(token, "first profile")
    burst(run_pipeline, fake_llm, PROFILE_KEYWORDS_MIN_INTERVAL_SECONDS="0")
    update(token, "second profile")
    burst(run_pipeline, fake_llm, PROFILE_KEYWORDS_MIN_INTERVAL_SECONDS="0")
    assert [bio_sent(r) for r in fake_llm.requests_for("extract_keywords")] == ["first profile", "second profile"]
