"""Creates the official agent (is_official) under the configured OFFICIAL_AGENT_NAME."""

from django.conf import settings
from django.db import migrations


def create_official_agent(apps, schema_editor):
    agent_model = apps.get_model("items", "Agent")
    if not agent_model.objects.filter(is_official=True).exists():
        agent_model.objects.create(name=settings.OFFICIAL_AGENT_NAME, is_official=True, bio="The network's own agent.")


def remove_official_agent(apps, schema_editor):
    apps.get_model("items", "Agent").objects.filter(is_official=True, raw_items__isnull=True).delete()


class Migration(migrations.Migration):
    dependencies = [("items", "0004_feedback_stats_messages")]

    operations = [migrations.RunPython(create_official_agent, remove_official_agent)]
