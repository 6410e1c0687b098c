"""Enrichment of one item (docs/enrichment.md): cheap gates first, model calls last, every step's decision recorded.

The consumer in pipeline.consumers.item_publish claims the item and hands it here. Intermediate results
(embedding, safety pass, extraction, suggestion) are checkpointed on the item, so a redelivered entry pays
for no model call twice. A model that is unavailable releases the item for a retry; when the runtime gives
up on the entry, the consumer's final hook marks the item `failed` (items.services.enrichment_state.item_give_up).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from eigenflux.base import tracing
from eigenflux.base.embedding_space import configured_embedding_model
from items.blacklist_cache import blacklist_match
from items.models import EXTRACTED_FIELDS, DecisionStage, ItemStatus, ProcessedItem, PublicReason, RawItem
from items.selectors import SimilarHit, exact_duplicate_of, most_similar
from items.services.enrichment_state import (
    Cause,
    Decision,
    item_checkpoint,
    item_complete,
    item_discard,
    item_release,
    parse_expire_time,
)
from pipeline import llm, metrics
from pipeline.llm.accounting import carried_rows, write_deferred
from pipeline.llm.embeddings import grouping_thresholds
from pipeline.llm.errors import MODEL
from pipeline.review_holds import discard_hold, review_hold, safety_reading
from pipeline.runtime import Event, LeaseLost, NothingToDo, RetryLater, dependencies
from pipeline.runtime.dependencies import is_postgres_outage

log = logging.getLogger(__name__)
T = TypeVar("T")


class UnsavedCheckpoints:
    """Model results whose checkpoint could not be written because PostgreSQL was down, kept in this process
    until the same stream entry runs again — the runtime pauses it here until the database is back — and
    then written before anything else: a database outage costs no model call twice. Bounded (oldest go
    first); an entry that is taken over by another process simply pays again there."""

    def __init__(self, limit: int = 10_000):
        self.limit = limit
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple[str, int], list[tuple[dict, list[Decision]]]] = OrderedDict()

    def keep(self, key: tuple[str, int], fields: dict, decisions: list[Decision]) -> None:
        with self._lock:
            self._kept.setdefault(key, []).append((fields, decisions))
            while len(self._kept) > self.limit:
                self._kept.popitem(last=False)

    def take(self, key: tuple[str, int]) -> list[tuple[dict, list[Decision]]]:
        with self._lock:
            return self._kept.pop(key, [])

    def put_back(self, key: tuple[str, int], kept: list[tuple[dict, list[Decision]]]) -> None:
        with self._lock:
            self._kept[key] = kept + self._kept.get(key, [])


UNSAVED = UnsavedCheckpoints()


class Unread:
    """Not read yet (Enrichment's duplicate: None means read, and there is none)."""


UNREAD = Unread()


class Enrichment:
    def __init__(
        self, *, item: ProcessedItem, token: str, event: Event, duplicate: RawItem | Unread | None = UNREAD
    ) -> None:
        self.item = item
        # The exact duplicate, when the claim's statement read it (items.services.item_claim).
        self.duplicate = duplicate
        self.raw = item.raw
        self.token = token
        self.event = event
        # The outcome event continues the trace from this handler's span (the entry's traceparent if untraced).
        self.cause = Cause(
            event_id=event.id,
            correlation_id=event.correlation_id,
            traceparent=tracing.current_traceparent(event.traceparent),
            replay=event.replay,
        )
        # Decisions made and not yet written: they go with the next checkpoint or the outcome, so the history
        # lists every step in the order it ran (each Decision carries the time it was made).
        self.decisions: list[Decision] = []
        self.approved = event.data.get("override") == "approve"

    # --- the steps --------------------------------------------------------------------------------
    def run(self) -> None:
        self._restore_unsaved()
        if self.approved:
            return self._run_approved()
        keyword = blacklist_match(self.raw.content, self.raw.url, self.raw.notes)
        if keyword:
            return self._discard(Decision(DecisionStage.BLACKLIST, "discard", "keyword", f"matched {keyword!r}"))
        self.decisions.append(Decision(DecisionStage.BLACKLIST, "pass"))

        original = exact_duplicate_of(self.item) if isinstance(self.duplicate, Unread) else self.duplicate
        if original is not None:
            return self._discard(
                Decision(DecisionStage.DUPLICATE, "discard", "exact", f"same content as item {original.pk}"),
                reason=PublicReason.DUPLICATE,
                duplicate_of=original,
            )
        self.decisions.append(Decision(DecisionStage.DUPLICATE, "pass"))

        hit = most_similar(embedding=self._embedding(), exclude_id=self.item.pk)

        if self.item.safety_passed_at is None:
            verdict = self._call(DecisionStage.SAFETY, "hold", llm.safety_check, **self._text())
            if not verdict.value.safe:
                return self._discard(
                    Decision(DecisionStage.SAFETY, "unsafe", verdict.value.flag, verdict.value.reason, verdict.model),
                    safety_risk=verdict.value.risk,
                )
            reading, why = safety_reading(verdict.value.risk)
            self._checkpoint(
                safety_passed_at=timezone.now(),
                safety_risk=verdict.value.risk,
                decision=Decision(DecisionStage.SAFETY, reading, reason=why, model=verdict.model),
            )

        extraction, fields = self._extraction()
        model = fields["analyzer"]
        if extraction.discard:
            reason = extraction.discard_reason
            decision = Decision(DecisionStage.EXTRACTION, "discard", reason, extraction.summary, model)
            unsure = discard_hold(extraction)
            if unsure is None:
                return self._discard(decision, **fields)
            self.decisions.append(decision)
            return self._complete(extraction, fields, hit, held=unsure)
        self.decisions.append(Decision(DecisionStage.EXTRACTION, "pass", model=model))
        if extraction.quality < settings.QUALITY_THRESHOLD:
            return self._discard(
                Decision(
                    DecisionStage.QUALITY,
                    "discard",
                    "low_quality",
                    f"quality {extraction.quality:.2f} < threshold {settings.QUALITY_THRESHOLD:.2f}",
                    model,
                ),
                **fields,
            )
        self.decisions.append(Decision(DecisionStage.QUALITY, "pass", reason=f"quality {extraction.quality:.2f}"))
        return self._complete(extraction, fields, hit, held=review_hold(self.item.safety_risk, extraction.quality))

    def _run_approved(self) -> None:
        """A moderator approved the item (docs/admin.md): the gates are overridden; extraction still runs."""
        hit = most_similar(embedding=self._embedding(), exclude_id=self.item.pk)
        extraction, fields = self._extraction()
        overridden = "gates overridden by a moderator"
        self.decisions.append(Decision(DecisionStage.EXTRACTION, "pass", reason=overridden, model=fields["analyzer"]))
        return self._complete(extraction, fields, hit)

    def _extraction(self):
        if self.item.extraction is None:
            answer = self._call(
                DecisionStage.EXTRACTION,
                "invalid",
                llm.extract_item,
                accept_reply=self.raw.accept_reply,
                **self._text(),
            )
            self._checkpoint(extraction=answer.value.model_dump(mode="json"), analyzer=answer.model)
        extraction = llm.Extraction.model_validate(self.item.extraction)
        fields = {name: getattr(extraction, name) for name in EXTRACTED_FIELDS}
        fields["expire_time"] = parse_expire_time(extraction.expire_time)
        fields["analyzer"] = self.item.analyzer
        return extraction, fields

    def _complete(self, extraction, fields: dict, hit: SimilarHit | None, held: Decision | None = None) -> None:
        """Persist: `completed`, or `review` when the analyzer was unsure (`held`, the hold's decision). A new
        suggestion is written with the outcome, not checkpointed first (one statement and transaction fewer
        per item); should the outcome fail, it is checkpointed then, so a redelivery does not ask again. A held
        item gets none: readers may never see it, and the moderator's approval asks for it (pipeline.suggestions)."""
        fields["group_id"] = self._group(hit, extraction.broadcast_type)
        fresh = False
        if held is None:
            fields["suggestion"], fresh = self._suggestion(extraction)
        if fresh:
            fields["suggested_at"] = timezone.now()
        try:
            self._lease_check()
            done = item_complete(
                item=self.item,
                token=self.token,
                decisions=[*self.decisions, held] if held is not None else self.decisions,
                cause=self.cause,
                fields=fields,
                check_duplicate=not self.approved,
                hold=held is not None,
                carry=carried_rows,
            )
        except (LeaseLost, DatabaseError):
            if fresh:
                self._keep_suggestion(fields["suggestion"], fields["suggested_at"])
            raise
        if not done:
            raise NothingToDo(f"item {self.item.pk} was deleted or taken over before it could complete")
        # Completing can still discard: an identical item may have completed first.
        self._terminal(self.item.status, f"analyzer {fields['analyzer']}")

    def _keep_suggestion(self, suggestion: str, suggested_at) -> None:
        """The outcome failed after a new suggestion: checkpoint it (best effort: a database outage keeps it in
        this process, UNSAVED; a claim taken over meanwhile is no longer ours to write)."""
        with contextlib.suppress(NothingToDo, DatabaseError):
            self._checkpoint(suggestion=suggestion, suggested_at=suggested_at)

    def _embedding(self) -> list[float]:
        model = configured_embedding_model()
        if self.item.embedding_model == model:  # a vector of another model is not reused: it is made again
            for kept in (self.item.embedding, self.item.pending_embedding):
                if kept is not None:
                    return list(kept)
        # The content alone: notes are the author's, and a vector holding them would let other agents find the
        # item by words only the notes contain (semantic search) and group it by them.
        answer = self._call(DecisionStage.EMBEDDING, "unavailable", llm.embed, [self.raw.content])
        vector = answer.value[0]
        # Unindexed until the completion (items.models); stamped with the model that made it.
        self._checkpoint(pending_embedding=vector, embedding_model=model)
        return vector

    def _group(self, hit: SimilarHit | None, broadcast_type: str) -> int:
        """docs/enrichment.md#grouping: join the nearest item's group at cosine >= SIMILARITY_THRESHOLD; the type
        may only ungroup (demand/supply: same author only; alert: cosine >= 0.85 and under 6 h old)."""
        join, alert = grouping_thresholds()
        if hit is None or hit.cosine < join:
            return self.item.pk
        if broadcast_type in ("demand", "supply") and hit.author_id != self.item.author_id:
            return self.item.pk
        if broadcast_type == "alert":
            window = timedelta(hours=settings.ALERT_GROUP_WINDOW_HOURS)
            recent = self.item.created_at - hit.created_at < window
            if hit.cosine < alert or not recent:
                return self.item.pk
        return hit.group_id

    def _suggestion(self, extraction) -> tuple[str, bool]:
        """The suggestion, and whether it is new (not yet written). Best effort: any model failure leaves it
        empty and never blocks the item. Kept like the other model results (with the outcome, or checkpointed
        when that fails), so a redelivery (crash, lost lease, database outage at persist) does not ask again."""
        if self.item.suggested_at is not None:
            return self.item.suggestion, False
        try:
            answer = llm.suggest_action(
                content=self.raw.content,
                summary=extraction.summary,
                broadcast_type=extraction.broadcast_type,
                item_id=self.item.pk,
                cancel=self.event.lease.cancelled,
            )
        except llm.CallCancelled as exc:
            raise LeaseLost(str(exc)) from exc
        except llm.ModelError as exc:
            if isinstance(exc, llm.ModelUnavailable) and not dependencies.is_up(MODEL):
                # Not this item's failure but an outage: wait for the model (the runtime pauses the entry,
                # the other results are checkpointed) rather than publish the item without its suggestion.
                raise RetryLater(f"suggest_action: {exc.__class__.__name__}: {exc}") from exc
            log.warning("suggestion failed for item %s: %s", self.item.pk, exc.__class__.__name__)
            suggestion = ""
        else:
            suggestion = answer.value.suggestion
        return suggestion, True

    # --- plumbing ---------------------------------------------------------------------------------
    def _text(self) -> dict:
        return {"content": self.raw.content, "notes": self.raw.notes, "url": self.raw.url}

    def _call(self, stage: str, verdict: str, task: Callable[..., T], *args, **kwargs) -> T:
        """One model task; a failure releases the item and asks for a retry. Whether that retry counts is the
        runtime's call: an unavailable model (ModelUnavailable, the cause) pauses the consumer when it is down
        for everyone; when the runtime gives up, the consumer's final hook marks the item `failed`.

        The claim's lease is extended by the checkpoint (or terminal write) that follows every call, in the
        same update, and the call's LLMCall rows are written in that transaction too."""
        self._lease_check()
        try:
            result = task(*args, item_id=self.item.pk, cancel=self.event.lease.cancelled, **kwargs)
        except llm.CallCancelled as exc:
            raise LeaseLost(str(exc)) from exc
        except llm.ModelError as exc:
            error = f"{task.__name__}: {exc.__class__.__name__}: {exc}"
            decision = Decision(stage, verdict, exc.__class__.__name__, str(exc)[:1000])
            item_release(item=self.item, token=self.token, error=error, decision=decision, also=write_deferred)
            raise RetryLater(error) from exc
        return result

    def _checkpoint(self, decision: Decision | None = None, **fields) -> None:
        decisions = [*self.decisions, decision] if decision is not None else list(self.decisions)
        try:
            done = item_checkpoint(
                item=self.item,
                token=self.token,
                decisions=decisions,
                lease_seconds=settings.ENRICHMENT_LEASE_SECONDS,
                carry=carried_rows,
                **fields,
            )
        except DatabaseError as exc:
            if is_postgres_outage(exc):
                UNSAVED.keep(self._key, fields, decisions)
            raise
        if not done:
            raise NothingToDo(f"item {self.item.pk} was deleted or taken over; no further model call")
        self.decisions.clear()

    @property
    def _key(self) -> tuple[str, int]:
        return self.event.message_id, self.item.pk

    def _restore_unsaved(self) -> None:
        """Write the checkpoints an earlier run of this entry could not (the database was down)."""
        kept = UNSAVED.take(self._key)
        for done, (fields, decisions) in enumerate(kept):
            try:
                written = item_checkpoint(item=self.item, token=self.token, decisions=decisions, **fields)
            except DatabaseError as exc:
                if is_postgres_outage(exc):
                    UNSAVED.put_back(self._key, kept[done:])
                raise
            if not written:
                raise NothingToDo(f"item {self.item.pk} was deleted or taken over")

    def _discard(self, decision: Decision, *, reason: str = PublicReason.CONTENT_EVALUATION, **fields) -> None:
        self._lease_check()
        done = item_discard(
            item=self.item,
            token=self.token,
            decisions=[*self.decisions, decision],
            reason=reason,
            cause=self.cause,
            carry=carried_rows,
            **fields,
        )
        if not done:
            raise NothingToDo(f"item {self.item.pk} was deleted or taken over before it could be discarded")
        self._terminal(ItemStatus.DISCARDED, f"at {decision.stage}: {decision.category or decision.verdict}")

    def _terminal(self, status: str, detail: str) -> None:
        item_terminal(self.item.pk, status, self.raw.created_at, detail, observe=not self.approved)

    def _lease_check(self) -> None:
        self.event.lease.check()


def item_terminal(item_id: int, status: str, published_at, detail: str, *, observe: bool = True) -> None:
    """An item reached a terminal status: one log line and the publish-to-terminal latency. A moderator's
    approval re-runs an old item, so its age says nothing about the pipeline and is not observed."""
    seconds = (timezone.now() - published_at).total_seconds()
    if observe:
        metrics.E2E_SECONDS.labels(status).observe(max(0.0, seconds))
    level = logging.WARNING if status == ItemStatus.FAILED else logging.INFO
    log.log(level, "item %s %s %.2fs after publish (%s)", item_id, status, seconds, detail)
