"""Circuit breakers and the dependency signals they run on, without any server (a fake clock), plus the
classification of real failures (a refused PostgreSQL connection, a refused Redis connection)."""

from __future__ import annotations

import psycopg
import pytest
import redis
from django.db import connection
from django.db import utils as db_utils

from pipeline.llm.errors import MODEL, ModelOutputInvalid, ModelUnavailable
from pipeline.runtime import RetryLater
from pipeline.runtime.breaker import Admission, Admit, Breakers, CircuitBreaker, State, Verdict
from pipeline.runtime.dependencies import POSTGRESQL, REDIS, dependency_of, is_up, observing, probe, report
from tests.fakes.openai_server import Fault


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def breaker(clock, **knobs) -> CircuitBreaker:
    return CircuitBreaker(
        "model", clock=clock, **{"threshold": 3, "open_seconds": 1.0, "max_open_seconds": 4.0, **knobs}
    )


class TestCircuitBreaker:
    def test_one_entry_failing_again_and_again_does_not_open_it(self):
        b = breaker(Clock())
        for _ in range(10):
            assert b.failure("poison") is False  # its own deliveries count: it ends in a dead letter
        assert b.state is State.CLOSED and b.admit() is Admit.ALLOW

    def test_threshold_different_entries_in_a_row_open_it(self):
        b = breaker(Clock())
        assert b.failure("a") is False
        assert b.failure("b") is False
        assert b.failure("c") is True  # an outage: this entry keeps its delivery
        assert b.state is State.OPEN and b.admit() is Admit.DENY
        assert b.failure("d") is True  # entries already running that fail now are the outage's too
        assert b.opened == 1

    def test_a_success_in_between_resets_the_count(self):
        b = breaker(Clock())
        b.failure("a")
        b.failure("b")
        b.success()
        assert b.failure("c") is False
        assert b.state is State.CLOSED

    @staticmethod
    def opened(clock, **knobs) -> CircuitBreaker:
        b = breaker(clock, **knobs)
        for entry in "abc":
            b.failure(entry)
        return b

    def test_half_open_waits_for_the_probe_then_lets_exactly_one_trial_through_and_its_success_closes(self):
        clock = Clock()
        b = self.opened(clock)
        clock.now += 0.99
        assert b.admit() is Admit.DENY and b.retry_in() == pytest.approx(0.01) and not b.needs_probe()
        clock.now += 0.01
        assert b.state is State.HALF_OPEN and b.needs_probe()
        assert b.admit() is Admit.DENY and not b.ready()  # the probe's verdict first
        b.probed(Verdict.UNKNOWN)
        assert b.ready() and not b.needs_probe()
        assert b.admit() is Admit.PROBE
        assert b.admit() is Admit.DENY and not b.ready()  # exactly one trial at a time
        b.success(at=clock.now)
        assert b.state is State.CLOSED and b.admit() is Admit.ALLOW

    def test_a_probe_saying_up_closes_it_without_a_trial_and_failures_count_again(self):
        clock = Clock()
        b = self.opened(clock)
        clock.now += 1
        b.probed(Verdict.UP)
        assert b.state is State.CLOSED and b.admit() is Admit.ALLOW
        assert b.failure("d") is False  # the entry's own failure: it counts

    @pytest.mark.parametrize(
        ("verdict", "outage"),
        [(Verdict.DOWN, True), (Verdict.UNKNOWN, False)],
        ids=["probe-down-spends-nothing", "probe-cannot-tell-counts"],
    )
    def test_a_failed_trial_reopens_and_counts_only_if_the_probe_did_not_say_down(self, verdict, outage):
        clock = Clock()
        b = self.opened(clock)
        clock.now += 1
        b.probed(verdict)
        assert b.admit() is Admit.PROBE
        assert b.failure("a", probe=True) is outage
        assert b.state is State.OPEN and b.retry_in() == 2.0 and b.hint is None
        assert b.failure("late", probe=False) is True  # an entry that started before the outage: not its fault

    def test_a_failed_trial_reopens_for_twice_as_long_up_to_the_cap(self):
        clock = Clock()
        b = self.opened(clock)
        waits = []
        for _ in range(4):
            clock.now += 100
            b.probed(Verdict.DOWN)
            assert b.admit() is Admit.PROBE
            assert b.failure("probe", probe=True) is True
            waits.append(b.retry_in())
        assert waits == [2.0, 4.0, 4.0, 4.0]

    def test_a_breaker_without_trials_reopens_when_its_probe_says_down(self):
        clock = Clock()
        b = self.opened(clock, trial=False)
        clock.now += 1
        b.probed(Verdict.DOWN)
        assert b.state is State.OPEN and b.retry_in() == 2.0 and b.admit() is Admit.DENY

    def test_a_verdict_older_than_the_open_interval_is_asked_again(self):
        clock = Clock()
        b = self.opened(clock)
        clock.now += 1
        b.probed(Verdict.DOWN)
        clock.now += 0.5
        assert not b.needs_probe()
        clock.now += 0.5
        assert b.needs_probe()  # idle half-open: nothing came to be the trial
        assert b.admit() is Admit.PROBE and not b.needs_probe()  # never while a trial is under way

    def test_open_age_runs_from_leaving_closed_through_every_reopening(self):
        clock = Clock()
        b = breaker(clock)
        assert b.open_age() == 0.0
        b.trip()
        for _ in range(3):
            clock.now += 10
            b.probed(Verdict.DOWN)
            b.admit()
            b.failure("t", probe=True)
        assert b.open_age() == 30.0
        b.success()
        assert b.open_age() == 0.0

    def test_a_trial_that_never_used_the_dependency_gives_the_slot_back(self):
        clock = Clock()
        b = self.opened(clock)
        clock.now += 1
        b.probed(Verdict.UNKNOWN)
        assert b.admit() is Admit.PROBE
        b.abandon_probe()
        assert b.state is State.HALF_OPEN and b.admit() is Admit.PROBE

    def test_news_from_before_the_outage_does_not_close_it(self):
        clock = Clock()
        b = breaker(clock)
        started = clock.now
        clock.now += 5
        for entry in "abc":
            b.failure(entry)
        b.success(at=started)  # an entry that used the model before it went down, finishing late
        assert b.state is State.OPEN
        b.success(at=clock.now + 0.5)
        assert b.state is State.CLOSED

    def test_trip_opens_at_once(self):
        b = breaker(Clock())
        b.trip()
        assert b.state is State.OPEN

    def test_invalid_settings_are_refused(self):
        with pytest.raises(ValueError, match="invalid circuit breaker"):
            CircuitBreaker("x", threshold=0)


class TestBreakers:
    def test_an_entry_starts_only_when_every_breaker_lets_it(self):
        clock = Clock()
        breakers = Breakers((POSTGRESQL, MODEL), threshold=1, open_seconds=1.0, max_open_seconds=2.0, clock=clock)
        assert breakers.admit() == Admission(frozenset())
        assert breakers.settle(Admission(), entry="a", ok={}, failed_dependency=MODEL) is True
        assert breakers.admit() is None and not breakers.ready()
        clock.now += 1
        assert breakers.admit() is None  # half-open, waiting for the probe's verdict
        breakers.by_name[MODEL].probed(Verdict.DOWN)
        admission = breakers.admit()
        assert admission == Admission(frozenset({MODEL}))
        assert breakers.admit() is None  # the trial slot is taken
        # The probe used the model successfully: closed again.
        assert breakers.settle(admission, entry="b", ok={MODEL: clock.now}, failed_dependency=None) is False
        assert breakers.all_closed()

    def test_a_probe_that_failed_on_another_dependency_releases_its_slot(self):
        clock = Clock()
        breakers = Breakers((POSTGRESQL, MODEL), threshold=1, open_seconds=1.0, max_open_seconds=2.0, clock=clock)
        breakers.settle(Admission(), entry="a", ok={}, failed_dependency=MODEL)
        clock.now += 1
        breakers.by_name[MODEL].probed(Verdict.UNKNOWN)
        admission = breakers.admit()
        breakers.settle(admission, entry="b", ok={}, failed_dependency=None)  # never reached the model
        assert breakers.by_name[MODEL].state is State.HALF_OPEN and breakers.ready()

    @pytest.mark.parametrize(("verdict", "outage"), [(Verdict.DOWN, True), (Verdict.UNKNOWN, False)])
    def test_a_failed_trial_is_an_outage_only_when_the_probe_said_down(self, verdict, outage):
        clock = Clock()
        knobs = {"threshold": 1, "open_seconds": 1.0, "max_open_seconds": 2.0, "clock": clock}
        breakers = Breakers((POSTGRESQL, MODEL, REDIS), no_trial=(REDIS,), **knobs)
        breakers.settle(Admission(), entry="a", ok={}, failed_dependency=MODEL)
        clock.now += 1
        breakers.by_name[MODEL].probed(verdict)
        admission = breakers.admit()
        assert admission == Admission(frozenset({MODEL}))
        assert breakers.settle(admission, entry="a", ok={}, failed_dependency=MODEL) is outage
        assert breakers.open_ages() == {MODEL: 1.0}
        assert [b.trial for b in breakers.by_name.values()] == [True, True, False]


class TestDependencyOf:
    @staticmethod
    def retry_caused_by(cause: Exception) -> RetryLater:
        """A RetryLater raised `from` the cause, as the enrichment consumer raises it."""
        error = RetryLater("the call failed")
        error.__cause__ = cause
        return error

    def test_model_unavailable_through_retry_later(self):
        assert dependency_of(self.retry_caused_by(ModelUnavailable("safety: 503"))) == MODEL

    def test_an_invalid_model_reply_is_no_outage(self):
        assert dependency_of(self.retry_caused_by(ModelOutputInvalid("truncated JSON"))) is None

    def test_a_refused_redis_connection(self, tmp_path):
        client = redis.Redis(unix_socket_path=str(tmp_path / "none.sock"))
        with pytest.raises(redis.ConnectionError) as info:
            client.ping()
        assert dependency_of(info.value) == REDIS
        assert dependency_of(redis.ResponseError("WRONGTYPE")) is None

    @pytest.mark.django_db
    def test_a_refused_postgresql_connection_but_not_a_failed_statement(self):
        with pytest.raises(psycopg.OperationalError) as refused:
            psycopg.connect(host="127.0.0.1", port=1, dbname="x", connect_timeout=2)
        wrapped = db_utils.OperationalError(str(refused.value))
        wrapped.__cause__ = refused.value
        assert dependency_of(wrapped) == POSTGRESQL
        with pytest.raises(db_utils.DatabaseError) as bad, connection.cursor() as cursor:
            cursor.execute("SELECT 1/0")
        assert dependency_of(bad.value) is None
        assert dependency_of(RetryLater("busy")) is None

    @pytest.mark.django_db
    def test_observing_records_successful_queries_and_model_reports(self):
        with observing() as uses:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            report(MODEL, False)
        assert POSTGRESQL in uses.ok and MODEL in uses.failed
        report(MODEL, True)  # outside a scope: ignored
        assert MODEL not in uses.ok


class TestIsUp:
    """The direct probes the runtime uses to confirm an outage and to close a half-open breaker."""

    def test_the_model_endpoint_up_down_and_unreachable(self, fake_llm, settings):
        assert is_up(MODEL) is True
        fake_llm.server.outage = Fault.server_error(503)
        assert is_up(MODEL) is False
        fake_llm.server.outage = Fault.disconnect()
        assert is_up(MODEL) is False
        fake_llm.server.outage = None
        assert [r.task for r in fake_llm.requests][-1] == "models"
        assert fake_llm.answered("safety") == 0  # probing costs no model call
        settings.SAFETY_LLM_BASE_URL = "http://127.0.0.1:1/v1"  # nothing listens there
        assert is_up(MODEL) is False

    def test_a_server_without_a_models_route_still_counts_as_up(self, fake_llm, settings):
        settings.LLM_BASE_URL = settings.SAFETY_LLM_BASE_URL = settings.EMBEDDING_BASE_URL = (
            fake_llm.url.removesuffix("/v1") + "/other"
        )
        assert is_up(MODEL) is True  # it answered (404): reachable

    @pytest.mark.parametrize(
        ("status", "verdict"),
        [
            (200, Verdict.UP),
            (404, Verdict.UNKNOWN),  # no such route
            (405, Verdict.UNKNOWN),  # the gateway routes only POST
            (501, Verdict.UNKNOWN),  # not implemented
            (401, Verdict.UNKNOWN),  # about the probe request, not the model calls
            (503, Verdict.DOWN),
            (429, Verdict.DOWN),
        ],
    )
    def test_what_get_models_answers_is_a_hint_that_may_not_tell(self, fake_llm, status, verdict):
        fake_llm.server.models_status = status
        assert probe(MODEL) is verdict
        assert is_up(MODEL) is (verdict is not Verdict.DOWN)  # cannot tell: a failure is the entry's own
        assert {r.status for r in fake_llm.requests_for("models")} == {status}

    def test_a_models_page_that_is_not_a_model_list_cannot_tell(self, fake_llm):
        # A gateway whose base URL serves a web page: the SDK cannot parse it (it raises neither a connection
        # nor a status error); the probe must still give a verdict, or a half-open breaker waits for ever.
        fake_llm.server.models_html = True
        assert probe(MODEL) is Verdict.UNKNOWN
        assert is_up(MODEL) is True

    def test_one_endpoint_down_makes_the_verdict_down(self, fake_llm, settings):
        fake_llm.server.models_status = 501
        settings.SAFETY_LLM_BASE_URL = "http://127.0.0.1:1/v1"  # nothing listens there
        assert probe(MODEL) is Verdict.DOWN

    def test_the_local_analyzer_is_always_up(self, settings):
        settings.LLM_PROVIDER = "local"
        assert is_up(MODEL) is True

    @pytest.mark.django_db(transaction=True)
    def test_postgresql_and_redis(self, settings, tmp_path):
        assert is_up(POSTGRESQL) is True
        assert is_up(REDIS) is True
        settings.REDIS_URL = f"unix://{tmp_path}/nothing.sock"
        assert is_up(REDIS) is False
