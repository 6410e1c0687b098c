"""Decisions: an embedding failure gets its own stage (it was recorded as an extraction step; earlier rows are
moved over so the history reads the same for old and new items), and `created_at` is the time the step was
decided, given by the writer (the pipeline writes a step's decision with its next checkpoint), no longer the
time of the insert. The column is unchanged."""

import django.utils.timezone
from django.db import migrations, models


def embedding_stage(apps, schema_editor):
    decisions = apps.get_model("items", "ModerationDecision")
    decisions.objects.filter(stage="extraction", verdict="embedding_unavailable").update(
        stage="embedding", verdict="unavailable"
    )


def extraction_stage(apps, schema_editor):
    decisions = apps.get_model("items", "ModerationDecision")
    decisions.objects.filter(stage="embedding", verdict="unavailable").update(
        stage="extraction", verdict="embedding_unavailable"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("items", "0013_embedding_hnsw_per_broadcast_type"),
    ]

    operations = [
        migrations.AlterField(
            model_name="moderationdecision",
            name="stage",
            field=models.CharField(
                choices=[
                    ("blacklist", "blacklist"),
                    ("duplicate", "duplicate"),
                    ("embedding", "embedding"),
                    ("safety", "safety"),
                    ("extraction", "extraction"),
                    ("quality", "quality"),
                    ("moderator", "moderator"),
                    ("author", "author"),
                    ("delivery", "delivery"),
                ],
                max_length=16,
            ),
        ),
        migrations.RunPython(embedding_stage, extraction_stage),
        migrations.AlterField(
            model_name="moderationdecision",
            name="created_at",
            field=models.DateTimeField(default=django.utils.timezone.now, editable=False),
        ),
    ]
