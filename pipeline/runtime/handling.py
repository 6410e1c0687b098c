"""The worker threads of one runner and what becomes of each entry after its handler ran
(docs/delivery.md#runtime, docs/stream-runtime.md#giving-up).

The handler only returns or raises; this module maps that to an outcome: ACK, a retry after a delay, a pause
while a dependency is down (that attempt does not count), the final hook and the dead letter, or nothing at
all when the lease was lost. Before a handler starts, its attempt is charged to the entry's delivery count
(pipeline.runtime.deliveries) and admitted by the circuit breakers; a handler never starts during a stop.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis
from django.db import close_old_connections, connection

from eigenflux.base.dbpool import pool_exhausted, release_connection
from eigenflux.base.dbprobe import postgres_answers_directly
from pipeline.runtime import dependencies, instruments
from pipeline.runtime.breaker import Admission, State
from pipeline.runtime.dead_lettering import dead_letter
from pipeline.runtime.deliveries import Delivery
from pipeline.runtime.errors import DeadLetterNow, LeaseLost, NothingToDo, RetryLater
from pipeline.runtime.logcontext import delivery_log_context
from pipeline.runtime.membership import error_text
from pipeline.runtime.tracing import handling_span
from pipeline.runtime.wiring import Shared

log = logging.getLogger(__name__)

OUTCOMES = ("acked", "nothing_to_do", "retried", "dead_lettered", "lease_lost", "released", "paused")


@dataclass
class Attempt:
    """What one handler run came to."""

    outcome: str  # acked, nothing_to_do, lease_lost, released, permanent, transient, no_connection
    error: Exception | None
    ok: dict[str, float]  # dependencies the handler used successfully (when last)


class Handling:
    def __init__(self, shared: Shared, *, max_waiting_retries: int, on_error: Callable[[str], None]):
        self.member, self.consumer, self.policy = shared.member, shared.consumer, shared.policy
        self.scheduler, self.acker, self.counts = shared.scheduler, shared.acker, shared.counts
        self.max_waiting_retries = max_waiting_retries
        self._stopping = shared.stopping
        self._wake_keeper = shared.wake_keeper
        self._on_error = on_error  # a runtime fault on one entry, counted per loop
        labels = (self.member.stream, self.member.group)
        self._m = {outcome: instruments.MESSAGES.labels(*labels, outcome) for outcome in OUTCOMES}
        self._m_seconds = instruments.HANDLE_SECONDS.labels(*labels)
        self._m_retries = instruments.RETRIES.labels(*labels)
        self._m_lease_lost = instruments.LEASE_LOSSES.labels(*labels)

    # --- the worker threads ----------------------------------------------------------------------------------

    def work_loop(self, name: str, tick: Callable[[], None]) -> None:
        try:
            while True:
                tick()
                try:
                    delivery = self.scheduler.next_work(timeout=1.0)
                except queue.Empty:
                    continue
                if delivery is None:
                    return
                try:
                    # Every line logged while handling (the handler's and the runtime's) carries the delivery's ids.
                    with self._log_context(delivery):
                        self.run(delivery)
                except Exception:
                    # A runtime fault on this entry (not the handler's: _attempt catches those): the entry is
                    # let go, stays pending and is reclaimed after the lease; this thread carries on.
                    log.exception(
                        "%s: runtime error on %s; leaving it for reclaim", self.member.name, delivery.message_id
                    )
                    self._on_error(name)
                    self.scheduler.release(delivery)
                finally:
                    self.scheduler.work_done()
        finally:
            connection.close()

    def _log_context(self, delivery: Delivery) -> contextlib.AbstractContextManager[object]:
        if delivery.event is None:
            return contextlib.nullcontext()
        return delivery_log_context(delivery.event, consumer=self.member.name, delivery_count=delivery.delivery_count)

    def run(self, delivery: Delivery) -> None:
        """Start the entry's handler (or its give-up path), unless stopping, lost or held back by a breaker."""
        if self._stopping.is_set():
            # Not started: leave it pending (another process reclaims it after the lease timeout).
            self._m["released"].inc()
            self.scheduler.leave(delivery)
            return
        if delivery.lease.cancelled.is_set():
            self.lost(delivery)
            return
        admission = self.member.breakers.admit()
        if admission is None:
            self.pause(delivery)
            return
        if delivery.verdict is not None:
            self.finish_give_up(delivery, admission)
            return
        if not self.counts.spend(delivery):
            self.member.breakers.release(admission)
            if delivery.lease.lost:
                self.lost(delivery)
            else:
                self.pause(delivery)
            return
        self.scheduler.started()
        try:
            self._handle(delivery, admission)
        finally:
            self.scheduler.finished()

    # --- one handler run and its outcome -----------------------------------------------------------------------

    def _handle(self, delivery: Delivery, admission: Admission) -> None:
        attempt = self._attempt(delivery)
        if delivery.lease.lost:
            attempt.outcome = "lease_lost"
        elif attempt.outcome == "transient" and pool_exhausted(attempt.error) and postgres_answers_directly():
            # No free connection in this process's pool while PostgreSQL itself answers: not an outage.
            attempt.outcome = "no_connection"
        failed = dependencies.dependency_of(attempt.error) if attempt.outcome == "transient" else None
        breakers = self.member.breakers
        outage = breakers.settle(admission, entry=delivery.message_id, ok=attempt.ok, failed_dependency=failed)
        if failed not in admission.probes:  # a trial's verdict was asked before it started
            outage = self.confirm_outage(failed, outage)
        if admission.probes:
            self._report_trial(delivery, admission, failed, outage)
        self._settle(delivery, attempt, failed if outage else None)

    def _report_trial(self, delivery: Delivery, admission: Admission, failed: str | None, outage: bool) -> None:
        """Say what a half-open breaker's trial entry came to; a breaker it closed resumes the paused entries."""
        for name in sorted(admission.probes):
            breaker = self.member.breakers.by_name[name]
            if breaker.state is State.CLOSED:
                log.info(
                    "%s: %s is back (trial entry %s succeeded); resuming", self.member.name, name, delivery.message_id
                )
                self._wake_keeper.set()
            elif name == failed:
                log.warning(
                    "%s: %s still failing (trial entry %s, open %.0fs); the attempt %s",
                    self.member.name,
                    name,
                    delivery.message_id,
                    breaker.open_age(),
                    "does not count (the probe says down)" if outage else "counts (the probe did not say down)",
                )

    def _attempt(self, delivery: Delivery) -> Attempt:
        """Run the handler once; every exception it raises becomes an outcome."""
        event = delivery.event
        assert event is not None  # a malformed entry gets its verdict when read and never reaches a handler
        event.delivery_count = delivery.delivery_count
        delivery.credit -= 1  # this attempt uses its delivery
        close_old_connections()
        started = time.perf_counter()
        attempt = Attempt("acked", None, {})
        with dependencies.observing() as uses:
            try:
                with handling_span(event, consumer=self.member.name, delivery_count=delivery.delivery_count):
                    self.consumer.handle(event)
            except NothingToDo:
                attempt.outcome = "nothing_to_do"
            except LeaseLost:
                # Lost ownership, or cancelled by a hard shutdown (then the entry is merely left pending).
                attempt.outcome = "lease_lost" if delivery.lease.lost else "released"
            except DeadLetterNow as exc:
                attempt.outcome, attempt.error = "permanent", exc
            except RetryLater as exc:
                attempt.outcome, attempt.error = "transient", exc
            except Exception as exc:
                self._log_failure(delivery, exc)
                attempt.outcome, attempt.error = "transient", exc
            finally:
                # The connection goes back to the process's pool: threads hold one only while they use it.
                release_connection()
                self._m_seconds.observe(time.perf_counter() - started)
        attempt.ok = uses.ok
        return attempt

    def _log_failure(self, delivery: Delivery, exc: Exception) -> None:
        # Unexpected: treated as transient, retried, then dead-lettered for a person to look at. A dependency
        # going away is not unexpected: one line, the breaker takes it from there.
        name, message_id = self.member.name, delivery.message_id
        if dependencies.dependency_of(exc) is None:
            log.exception("%s: handler failed on %s (subject %s)", name, message_id, delivery.subject)
        else:
            log.warning("%s: handler failed on %s: %s", name, message_id, error_text(exc)[:300])

    def _settle(self, delivery: Delivery, attempt: Attempt, down: str | None) -> None:
        """Turn the attempt into an outcome; `down`: the dependency whose outage the attempt failed on."""
        outcome, error = attempt.outcome, attempt.error
        if outcome in ("acked", "nothing_to_do"):
            self._m[outcome].inc()
            self.acker.put(delivery.message_id)
            self.scheduler.release(delivery)
        elif outcome == "lease_lost":
            self.lost(delivery)
        elif outcome == "released":
            self._m["released"].inc()
            self.scheduler.release(delivery)
        elif outcome == "no_connection":
            # This process had no free database connection: not the entry's fault, so it runs again shortly
            # without counting a delivery (and never dead-letters for it).
            self._m["retried"].inc()
            delivery.credit += 1
            self.scheduler.later(delivery, 1.0)
        elif outcome == "permanent":
            delivery.give_up(self.member, "permanent", error_text(error))
            self.finish_give_up(delivery, None)
        elif down is not None:
            # The dependency is down for everyone: this attempt does not count, the entry waits for it.
            log.warning(
                "%s: %s is down; %s (subject %s) paused without spending a delivery: %s",
                self.member.name,
                down,
                delivery.message_id,
                delivery.subject,
                error_text(error),
            )
            self._m["paused"].inc()
            delivery.credit += 1
            self.pause(delivery)
        else:
            self._retry_or_give_up(delivery, error)

    def confirm_outage(self, dependency: str | None, outage: bool) -> bool:
        """A failure blamed on a dependency whose breaker is still closed: ask the dependency itself. Down for
        everyone means an outage (the entry keeps its delivery); up means the failure is the entry's own."""
        if dependency is None or outage:
            return outage
        if dependencies.is_up(dependency):
            return False
        self.member.breakers.by_name[dependency].trip()
        return True

    def _retry_or_give_up(self, delivery: Delivery, error: BaseException | None) -> None:
        delay = self.policy.next_delay(delivery.delivery_count, error)
        if delay is None:
            delivery.give_up(self.member, "transient", error_text(error))
            self.finish_give_up(delivery, None)
            return
        if self._stopping.is_set():
            self._m["released"].inc()
            self.scheduler.release(delivery)
            return
        name = self.member.name
        if not self.scheduler.later(delivery, delay, cap=self.max_waiting_retries):
            # The retry backlog in memory is capped: the entry is let go (still pending, its count right) and
            # whichever process reclaims it after the lease timeout retries it.
            waiting = len(self.scheduler.retry_heap)
            log.warning("%s: %d retries waiting; %s left for reclaim", name, waiting, delivery.message_id)
            self._m["released"].inc()
            self.scheduler.release(delivery)
            return
        self._m["retried"].inc()
        self._m_retries.inc()
        log.info(
            "%s: retrying %s (subject %s, delivery %d) in %.2fs: %s",
            name,
            delivery.message_id,
            delivery.subject,
            delivery.delivery_count,
            delay,
            error_text(error),
        )

    def pause(self, delivery: Delivery) -> None:
        """Pause an entry until the breakers let entries start again; its unused deliveries go back."""
        self.counts.give_back([delivery])
        self.scheduler.pause(delivery)

    def lost(self, delivery: Delivery) -> None:
        log.warning(
            "%s: lease lost on %s (subject %s); not ACKed, nothing committed",
            self.member.name,
            delivery.message_id,
            delivery.subject,
        )
        self._m["lease_lost"].inc()
        self._m_lease_lost.inc()
        self.scheduler.release(delivery)

    # --- giving up: the final hook, then the dead letter -------------------------------------------------------

    def finish_give_up(self, delivery: Delivery, admission: Admission | None) -> None:
        """The final hook, then the dead letter (or, for a consumer whose hook is the destination, the ACK)."""
        if not delivery.hook_done:
            if not self._final_hook(delivery, admission):
                return
        elif admission is not None:
            self.member.breakers.release(admission)
        if not self.consumer.dead_letter_stream:
            self._m["dead_lettered"].inc()
            self.acker.put(delivery.message_id)
            self.scheduler.release(delivery)
            return
        self._dead_letter(delivery)

    def _final_hook(self, delivery: Delivery, admission: Admission | None) -> bool:
        """Run the consumer's on_dead_letter hook. False: it failed, the entry waits (retry or pause)."""
        breakers, reason = self.member.breakers, delivery.verdict
        assert reason is not None  # only called once a verdict was set
        with dependencies.observing() as uses:
            try:
                self.consumer.on_dead_letter(delivery.event, reason)
            except Exception as exc:
                failed = dependencies.dependency_of(exc)
                outage = breakers.settle(
                    admission or Admission(), entry=delivery.message_id, ok=uses.ok, failed_dependency=failed
                )
                if failed not in (admission or Admission()).probes:
                    outage = self.confirm_outage(failed, outage)
                delivery.hook_failures += 1
                log.warning(
                    "%s: final hook failed for %s (%s); the entry stays pending: %s",
                    self.member.name,
                    delivery.message_id,
                    "dependency down" if outage else f"attempt {delivery.hook_failures}",
                    error_text(exc),
                )
                if outage:
                    self.pause(delivery)
                else:
                    self.scheduler.later(delivery, min(2.0**delivery.hook_failures, 60.0))
                return False
        if admission is not None:
            breakers.settle(admission, entry=delivery.message_id, ok=uses.ok, failed_dependency=None)
        delivery.hook_done = True
        return True

    def _dead_letter(self, delivery: Delivery) -> None:
        reason, member = delivery.verdict, self.member
        assert reason is not None  # only called once a verdict was set
        try:
            result = dead_letter(
                member.client,
                stream=member.stream,
                group=member.group,
                consumer=member.name,
                message_id=delivery.message_id,
                fields=delivery.fields,
                raw=delivery.raw if delivery.fields is None else None,
                delivery_count=delivery.delivery_count,
                error_class=reason.error_class,
                error=reason.error,
                scripts=member.scripts,
            )
        except redis.RedisError as exc:
            member.redis_down(exc, f"dead-lettering {delivery.message_id}")
            self.scheduler.later(delivery, 1.0)  # still ours: try again
            return
        if result is None:
            self._m["lease_lost"].inc()
            self._m_lease_lost.inc()
        else:
            self._m["dead_lettered"].inc()
            if result:
                instruments.DEAD_LETTERS.labels(member.stream, member.group, reason.error_class).inc()
                log.warning(
                    "%s: dead-lettered %s (%s): %s", member.name, delivery.message_id, reason.error_class, reason.error
                )
        self.scheduler.release(delivery)
