"""The consumer API, the retry policy, consume_once and the start-up banner, without run_pipeline processes."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction

from pipeline.management.commands.run_pipeline import mask
from pipeline.runtime import Consumer, Event, RetryLater, RetryPolicy, consume_once, register, registry
from pipeline.runtime.event import Lease, MalformedEntry, parse_entry
from tests.pipeline.runtime.conftest import envelope
from tests.pipeline.runtime.consumers import TEST_TYPE


class TestRetryPolicy:
    def test_delays_grow_then_dead_letter(self):
        policy = RetryPolicy(max_retries=4, base=1.0, factor=2.0, jitter=0.25)
        for _ in range(50):
            delays = [policy.next_delay(attempt) for attempt in (1, 2, 3)]
            assert 0.75 <= delays[0] <= 1.0 and 1.5 <= delays[1] <= 2.0 and 3.0 <= delays[2] <= 4.0
            assert delays[0] < delays[1] < delays[2]
        assert policy.next_delay(4) is None
        assert policy.next_delay(9) is None

    def test_default_is_three_deliveries(self):
        policy = RetryPolicy()
        assert policy.next_delay(2) is not None
        assert policy.next_delay(3) is None

    def test_jitter_varies_and_is_capped(self):
        policy = RetryPolicy(max_retries=20, base=1.0, max_delay=5.0, jitter=0.5)
        assert len({policy.next_delay(1) for _ in range(20)}) > 1
        assert all(policy.next_delay(15) <= 5.0 for _ in range(20))

    def test_error_delay_hint_wins(self):
        assert RetryPolicy().next_delay(1, RetryLater("429", delay=7.5)) == 7.5

    def test_invalid_values_refused(self):
        with pytest.raises(ValueError, match="invalid retry policy"):
            RetryPolicy(max_retries=0)


class TestRegistry:
    def test_missing_declaration_fails_at_registration(self):
        with pytest.raises(TypeError, match="must declare group, event_types"):

            @register
            class Incomplete(Consumer):
                name = "test-incomplete"
                stream = "s"

                def handle(self, event):
                    pass

    def test_missing_handle_fails(self):
        with pytest.raises(TypeError, match="handle"):

            @register
            class NoHandle(Consumer):
                name = "test-nohandle"
                stream = "s"
                group = "g"
                event_types = frozenset({"t"})

    def test_duplicate_name_fails(self):
        with pytest.raises(ValueError, match="already registered"):

            @register
            class Impostor(Consumer):
                name = "test-effects"
                stream = "s"
                group = "g"
                event_types = frozenset({"t"})

                def handle(self, event):
                    pass

        assert registry()["test-effects"].__name__ == "EffectsConsumer"

    def test_unknown_consumer_is_a_command_error_listing_valid_ones(self, settings):
        settings.PIPELINE_EXTRA_CONSUMER_MODULES = ["tests.pipeline.runtime.consumers"]
        with pytest.raises(CommandError, match=r"unknown consumer\(s\): nope\. Valid: .*test-effects, test-noop"):
            call_command("run_pipeline", consumer=["nope"], burst=True)


def test_banner_masks_secrets():
    assert mask("SECRET_KEY", "abc") == "****"
    assert mask("LLM_API_KEY", "sk-1") == "****"
    assert mask("LLM_API_KEY", "") == ""
    assert mask("DATABASE_URL", "postgresql://u:hunter2@db:5432/x") == "postgresql://u:****@db:5432/x"
    assert mask("REDIS_URL", "redis://:pw@localhost:6379/0") == "redis://:****@localhost:6379/0"
    assert mask("PIPELINE_CONCURRENCY", 8) == "8"


class TestParseEntry:
    def parse(self, fields):
        return parse_entry(
            stream="s",
            group="g",
            message_id="1-0",
            fields=fields,
            delivery_count=1,
            event_types=frozenset({TEST_TYPE}),
            lease=Lease(),
        )

    def test_valid_envelope(self):
        fields = envelope(subject="42", seq=3)
        fields["replay"] = "1"
        event = self.parse(fields)
        assert isinstance(event, Event)
        assert (event.subject, event.data, event.replay, event.id) == ("42", {"seq": 3}, True, fields["id"])

    @pytest.mark.parametrize(
        ("change", "message"),
        [
            ({"subject": ""}, "missing required field"),
            ({"data": "{not json"}, "bad JSON"),
            ({"data": "[1]"}, "JSON object"),
            ({"data": "[" * 6000 + "]" * 6000}, "bad JSON"),
            ({"type": "io.other.v1"}, "unknown type"),
            ({"data": '{"x": "' + "y" * 17000 + '"}'}, "oversize"),
        ],
    )
    def test_malformed(self, change, message):
        with pytest.raises(MalformedEntry, match=message):
            self.parse({**envelope(), **change})

    def test_lease_check(self):
        lease = Lease(verify=lambda: False)
        with pytest.raises(Exception, match="lease lost"):
            lease.check()
        assert lease.cancelled.is_set()


@pytest.mark.django_db(transaction=True)
def test_consume_once_records_each_group_event_once():
    event = parse_entry(
        stream="s",
        group="cg:a",
        message_id="1-0",
        fields=envelope(),
        delivery_count=1,
        event_types=frozenset({TEST_TYPE}),
        lease=Lease(),
    )
    with pytest.raises(RuntimeError, match="atomic"):
        consume_once(event)
    with transaction.atomic():
        assert consume_once(event) is True
    with transaction.atomic():
        assert consume_once(event) is False
    event.group = "cg:b"
    with transaction.atomic():
        assert consume_once(event) is True
