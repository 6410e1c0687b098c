"""Re-index every item's search vector in the new format (items.textsearch): the `english` configuration with
Chinese, Japanese and Korean text as character bigrams, keywords weighted above the summary above the content.
Also a GIN index on domains, for filtered searches.

The re-index runs the current items.textsearch over the stored fields, in batches; reversing it leaves the
new vectors in place (they are still valid tsvectors; re-run this migration's forward step to refresh them).
"""

import django.contrib.postgres.indexes
from django.db import migrations

BATCH = 500


def reindex(apps, schema_editor):
    from items.textsearch import search_vector_params, search_vector_sql

    ProcessedItem = apps.get_model("items", "ProcessedItem")
    RawItem = apps.get_model("items", "RawItem")
    table = schema_editor.quote_name(ProcessedItem._meta.db_table)
    pk = schema_editor.quote_name(ProcessedItem._meta.pk.column)
    statement = f"UPDATE {table} SET search_vector = {search_vector_sql()} WHERE {pk} = %s"  # noqa: S608
    rows = ProcessedItem.objects.using(schema_editor.connection.alias).filter(search_vector__isnull=False)
    last = 0
    while True:
        batch = list(rows.filter(pk__gt=last).order_by("pk").values_list("pk", "summary", "keywords")[:BATCH])
        if not batch:
            return
        contents = dict(RawItem.objects.filter(pk__in=[row[0] for row in batch]).values_list("pk", "content"))
        params = [
            [*search_vector_params(summary=summary, keywords=keywords, content=contents.get(item_id, "")), item_id]
            for item_id, summary, keywords in batch
        ]
        with schema_editor.connection.cursor() as cursor:
            cursor.executemany(statement, params)
        last = batch[-1][0]


class Migration(migrations.Migration):
    dependencies = [
        ("items", "0009_agent_profile_keywords_version"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="processeditem",
            index=django.contrib.postgres.indexes.GinIndex(fields=["domains"], name="processed_domains"),
        ),
        migrations.RunPython(reindex, migrations.RunPython.noop, elidable=True),
    ]
