"""Every stored vector names the embedding model that made it (docs/operations.md#changing-the-embedding-model).

The rows stored before are stamped with the model configured when this migration runs: an assumption, not a fact
(an operator who changed the model earlier without re-embedding clears the stamp and re-embeds everything). The
stamp is the new column's default while it is added, so PostgreSQL records it once in the catalogue instead of
rewriting every row (a rewrite would also insert each row again into both HNSW graphs: hours at a million items);
the default is then '' for rows written later, which always say their model. A row without a vector carries the
stamp too: without a vector it means nothing, and every reader of the column looks at rows with a vector only."""

from django.db import migrations, models

from eigenflux.base.embedding_space import configured_embedding_model

TABLES = ("items_processeditem", "items_readerprofile")


def add_stamped(apps, schema_editor):
    stamp = schema_editor.quote_value(configured_embedding_model())  # read when it runs, not when it is loaded
    for table in TABLES:
        name = schema_editor.quote_name(table)
        schema_editor.execute(f"ALTER TABLE {name} ADD COLUMN embedding_model varchar(100) NOT NULL DEFAULT {stamp}")
        schema_editor.execute(f"ALTER TABLE {name} ALTER COLUMN embedding_model SET DEFAULT ''")


def drop(apps, schema_editor):
    for table in TABLES:
        schema_editor.execute(f"ALTER TABLE {schema_editor.quote_name(table)} DROP COLUMN embedding_model")


def _field() -> models.CharField:
    return models.CharField(blank=True, db_default="", default="", max_length=100)


class Migration(migrations.Migration):
    dependencies = [("items", "0030_decision_uncertain_once_per_run")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(add_stamped, drop)],
            state_operations=[
                migrations.AddField(model_name="processeditem", name="embedding_model", field=_field()),
                migrations.AddField(model_name="readerprofile", name="embedding_model", field=_field()),
            ],
        )
    ]
