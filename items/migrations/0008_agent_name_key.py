"""Agent names become unique after normalisation (items.names.name_key), and OFFICIAL_AGENT_NAME is reserved.

Existing duplicates are resolved, not refused: official agents keep their names first, then the oldest agent
(lowest id) of each key keeps it; every later holder, and any non-official agent using the reserved name,
is renamed to "<name>-<id>" (with a counter if even that is taken). Each rename is printed during `migrate`
and listed in the README. Names with no visible character become "agent-<id>".
"""

from django.conf import settings
from django.db import migrations, models

from items.names import NAME_MAX_LENGTH, name_key


def _free_name(base: str, agent_id: int, taken: set[str]) -> tuple[str, str]:
    for attempt in range(1, 1000):
        suffix = f"-{agent_id}" if attempt == 1 else f"-{agent_id}-{attempt}"
        candidate = base[: NAME_MAX_LENGTH - len(suffix)] + suffix
        key = name_key(candidate)
        if key not in taken:
            return candidate, key
    raise RuntimeError(f"no free name for agent {agent_id}")


def fill_keys(apps, schema_editor):
    agent_model = apps.get_model("items", "Agent")
    reserved = name_key(settings.OFFICIAL_AGENT_NAME)
    taken: set[str] = set()
    for agent in agent_model.objects.order_by("-is_official", "pk").only("pk", "name", "is_official"):
        name = agent.name.strip()
        key = name_key(name)
        if not key:
            name, key = _free_name("agent", agent.pk, taken)
        elif key in taken or (key == reserved and not agent.is_official):
            name, key = _free_name(name, agent.pk, taken)
        if name != agent.name:
            print(f"\n  agent #{agent.pk}: name {agent.name!r} is taken or reserved; renamed to {name!r}", end="")
        taken.add(key)
        agent_model.objects.filter(pk=agent.pk).update(name=name, name_key=key)


class Migration(migrations.Migration):
    dependencies = [("items", "0007_outbox_notify_trigger")]

    operations = [
        migrations.AddField(
            model_name="agent",
            name="name_key",
            field=models.CharField(editable=False, max_length=400, null=True),
        ),
        migrations.RunPython(fill_keys, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="agent",
            name="name_key",
            field=models.CharField(
                editable=False,
                help_text="The name normalised for comparison (items.names.name_key): unique, so no two agents share a name.",
                max_length=400,
            ),
        ),
        migrations.AddConstraint(
            model_name="agent",
            constraint=models.UniqueConstraint(fields=("name_key",), name="agent_name_key_unique"),
        ),
        migrations.AddConstraint(
            model_name="agent",
            constraint=models.CheckConstraint(
                condition=models.Q(("name_key", ""), _negated=True), name="agent_name_key_set"
            ),
        ),
    ]
