"""Which profile version an agent's extracted keywords come from, so superseded extractions are skipped."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("items", "0008_agent_name_key")]

    operations = [
        migrations.AddField(
            model_name="agent",
            name="profile_keywords_version",
            field=models.DateTimeField(
                blank=True,
                editable=False,
                help_text="The profile version (its updated_at) the keywords were extracted from.",
                null=True,
            ),
        ),
    ]
