"""A pipeline step's pass is recorded once per enrichment run (docs/enrichment.md#decisions-and-their-order).

Items and decisions get a `run`: 0 from the publish, one more for each moderator action that sent the item back
to the pipeline (a requeue, or an approval without extracted fields, `approved`/`extraction_pending`). Existing
decisions are numbered from the moderator decisions before them in the history; then the passes a redelivered
entry recorded again are deleted (the earliest of each item, run and stage is kept) and the unique constraint
is added. Both columns default to 0 in the database too, so code deployed before this migration can still insert;
but a pipeline of that code whose entry runs again now fails its write on the repeated pass (it does not skip it)
and retries until a new process takes the entry: roll the pipeline out right after migrating. Reversing drops the
columns and the constraint; the deleted repeats are not restored. Locks: the constraint's unique index is built
(over the pipeline's passes only) while the table is write-locked, in the migration's transaction.
"""

from django.db import migrations, models

NEW_RUN = "stage = 'moderator' AND (verdict = 'requeued' OR (verdict = 'approved' AND category = 'extraction_pending'))"

NUMBER_DECISIONS = (
    "WITH numbered AS ("  # noqa: S608 - constant SQL
    f"SELECT id, SUM(CASE WHEN {NEW_RUN} THEN 1 ELSE 0 END) OVER (PARTITION BY item_id ORDER BY created_at, id) AS run "
    "FROM items_moderationdecision "
    f"WHERE item_id IN (SELECT item_id FROM items_moderationdecision WHERE {NEW_RUN})) "
    "UPDATE items_moderationdecision AS d SET run = numbered.run FROM numbered "
    "WHERE d.id = numbered.id AND numbered.run > 0"
)

NUMBER_ITEMS = (
    "UPDATE items_processeditem AS p SET run = counted.runs "  # noqa: S608 - constant SQL
    f"FROM (SELECT item_id, count(*) AS runs FROM items_moderationdecision WHERE {NEW_RUN} GROUP BY item_id) AS counted "
    "WHERE p.raw_id = counted.item_id"
)

DELETE_REPEATS = """
DELETE FROM items_moderationdecision AS later USING items_moderationdecision AS first
WHERE later.item_id = first.item_id AND later.run = first.run AND later.stage = first.stage
  AND later.actor = 'pipeline' AND later.verdict = 'pass' AND first.actor = 'pipeline' AND first.verdict = 'pass'
  AND (first.created_at, first.id) < (later.created_at, later.id)
"""


class Migration(migrations.Migration):
    dependencies = [("items", "0017_agent_name_lookalikes")]

    operations = [
        migrations.AddField(
            model_name="moderationdecision",
            name="run",
            field=models.PositiveIntegerField(
                db_default=0, default=0, help_text="The item's enrichment run (ProcessedItem.run) it belongs to."
            ),
        ),
        migrations.AddField(
            model_name="processeditem",
            name="run",
            field=models.PositiveIntegerField(
                db_default=0,
                default=0,
                help_text="The enrichment run: 0 from the publish, one more for each moderator action that sends the "
                "item back to the pipeline (requeue, or approve without extracted fields). Its decisions are recorded "
                "per run.",
            ),
        ),
        migrations.RunSQL(sql=[NUMBER_DECISIONS, NUMBER_ITEMS, DELETE_REPEATS], reverse_sql=migrations.RunSQL.noop),
        migrations.AddConstraint(
            model_name="moderationdecision",
            constraint=models.UniqueConstraint(
                condition=models.Q(("actor", "pipeline"), ("verdict", "pass")),
                fields=("item", "run", "stage"),
                name="decision_pass_once_per_run",
            ),
        ),
    ]
