"""ProcessedItem.concepts: the lexicon concepts of each item, stored at completion (docs/feed.md#how-fast); the
completed items already there get theirs here (later, `manage.py feed_concepts`)."""

import django.contrib.postgres.fields
from django.db import migrations, models


def fill(apps, schema_editor) -> None:
    from items.services.item_concepts import item_concepts_refresh

    item_concepts_refresh()


class Migration(migrations.Migration):
    # The fill commits batch by batch (items.services.item_concepts), not as one transaction over every item.
    atomic = False

    dependencies = [
        ("items", "0026_pending_embedding"),
    ]

    operations = [
        migrations.AddField(
            model_name="processeditem",
            name="concepts",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.SmallIntegerField(), blank=True, null=True, size=None
            ),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
