"""The migration that records a pipeline pass once per run: it numbers the runs of the history already written
(a moderator's requeue, or approval back to the pipeline, starts one), deletes the passes a redelivered entry
wrote again (keeping the earliest), then adds the constraint."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from items.models import ModerationDecision, ProcessedItem
from tests.factories import make_item

pytestmark = pytest.mark.django_db(transaction=True)


def _before_this_migration() -> tuple[str, str]:
    """The migration this one depends on, found by name: the numbers may change when branches are merged."""
    graph = MigrationExecutor(connection).loader.graph
    [mine] = [key for key in graph.nodes if key[0] == "items" and key[1].endswith("_decisions_once_per_run")]
    [parent] = [node.key for node in graph.node_map[mine].parents if node.key[0] == "items"]
    return parent


def test_the_migration_numbers_runs_and_keeps_the_first_pass_of_each_step_per_run():
    parent = _before_this_migration()
    repeated, untouched = make_item().pk, make_item().pk
    executor = MigrationExecutor(connection)
    executor.migrate([parent])
    old = executor.loader.project_state([parent]).apps.get_model("items", "ModerationDecision")
    start = timezone.now()

    def decide(pk: int, minute: int, stage: str, verdict: str, actor: str = "pipeline", category: str = "") -> int:
        at = start + timedelta(minutes=minute)
        fields = {"actor": actor, "stage": stage, "verdict": verdict, "category": category, "created_at": at}
        return old.objects.create(item_id=pk, **fields).pk

    first_blacklist = decide(repeated, 1, "blacklist", "pass")
    decide(repeated, 2, "duplicate", "pass")
    decide(repeated, 3, "safety", "pass")
    decide(repeated, 4, "blacklist", "pass")  # the entry ran again after a crash: repeats, deleted
    decide(repeated, 5, "duplicate", "pass")
    decide(repeated, 6, "extraction", "invalid")  # failed attempts are each kept
    decide(repeated, 7, "extraction", "invalid")
    decide(repeated, 8, "extraction", "discard")
    decide(repeated, 9, "moderator", "requeued", actor="mod")  # run 1
    decide(repeated, 10, "blacklist", "pass")
    decide(repeated, 11, "safety", "pass")
    decide(repeated, 12, "moderator", "approved", actor="mod", category="extraction_pending")  # run 2
    decide(repeated, 13, "extraction", "pass")
    decide(repeated, 14, "extraction", "pass")  # repeat, deleted
    decide(repeated, 15, "moderator", "taken_down", actor="mod", category="takedown")  # not a new run
    same_time = [decide(untouched, 1, "blacklist", "pass") for _ in range(2)]  # a tie: the first row is kept

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    rows = ModerationDecision.objects.filter(item_id=repeated).order_by("created_at", "pk")
    assert list(rows.values_list("run", "stage", "verdict")) == [
        (0, "blacklist", "pass"),
        (0, "duplicate", "pass"),
        (0, "safety", "pass"),
        (0, "extraction", "invalid"),
        (0, "extraction", "invalid"),
        (0, "extraction", "discard"),
        (1, "moderator", "requeued"),
        (1, "blacklist", "pass"),
        (1, "safety", "pass"),
        (2, "moderator", "approved"),
        (2, "extraction", "pass"),
        (2, "moderator", "taken_down"),
    ]
    assert rows.first().pk == first_blacklist
    assert list(ModerationDecision.objects.filter(item_id=untouched).values_list("pk", flat=True)) == same_time[:1]
    assert dict(ProcessedItem.objects.filter(pk__in=[repeated, untouched]).values_list("pk", "run")) == {
        repeated: 2,
        untouched: 0,
    }
    with pytest.raises(IntegrityError), transaction.atomic():
        ModerationDecision.objects.create(item_id=repeated, actor="pipeline", stage="blacklist", verdict="pass", run=1)
