"""Agent names become unique under look-alike folding too (items.names, docs/agent-names.md): `name_key` changes
meaning (it was the caseless name; it is now the UTS #39 skeleton of it) and `name_shape_key` (the name as
written) is added, unique like it.

Every agent's keys are recomputed. What the new rules reveal is resolved, never refused, in the order migration
0008 used: official agents first, then by age (lowest id first).
- Invisible characters that names may no longer hold are removed from the stored name (a narrow space becomes an
  ordinary one); a name left with nothing visible becomes "agent-<id>".
- A non-official agent whose name looks like the reserved name (OFFICIAL_AGENT_NAME) becomes "agent-<id>": a
  suffix would keep the impersonation.
- An agent whose name reads or looks like an older agent's (the older one keeps it) is renamed "<name>-<id>",
  with a counter if even that is taken.
Each change is printed by `migrate` with its reason, and nothing else about the agent changes. Names whose words
mix scripts or carry stray combining marks are refused for new names and renames only: an existing one stays
unless it collides. Reversing restores the caseless keys (unique, since the new keys are) and drops
`name_shape_key`; renames are not undone.
"""

from django.conf import settings
from django.db import migrations, models

from items.names import (
    NAME_KEY_MAX_LENGTH,
    NAME_MAX_LENGTH,
    NameKeys,
    caseless,
    looks_reserved,
    name_keys,
    without_invisible,
)


class _Taken:
    """The keys given out so far, each with the agent that holds it (for the report)."""

    def __init__(self) -> None:
        self.read: dict[str, str] = {}
        self.shape: dict[str, str] = {}

    def holder(self, keys: NameKeys) -> str | None:
        return self.read.get(keys.read) or self.shape.get(keys.shape)

    def add(self, keys: NameKeys, holder: str) -> None:
        self.read[keys.read], self.shape[keys.shape] = holder, holder


def _usable(keys: NameKeys) -> bool:
    return bool(keys.read and keys.shape) and max(len(keys.read), len(keys.shape)) <= NAME_KEY_MAX_LENGTH


def _free_name(base: str, agent_id: int, taken: _Taken) -> tuple[str, NameKeys]:
    for attempt in range(1, 1000):
        suffix = f"-{agent_id}" if attempt == 1 else f"-{agent_id}-{attempt}"
        candidate = base[: NAME_MAX_LENGTH - len(suffix)] + suffix
        keys = name_keys(candidate)
        if _usable(keys) and taken.holder(keys) is None and not looks_reserved(keys):
            return candidate, keys
    raise RuntimeError(f"no free name for agent {agent_id}")


def _resolve(agent, taken: _Taken) -> tuple[str, NameKeys, str]:
    """The agent's name under the new rules, its keys, and why the name changed ("" if it did not)."""
    name = without_invisible(agent.name).strip()
    reason = "held invisible characters" if name != agent.name.strip() else ""
    keys = name_keys(name)
    if not _usable(keys):
        return *_free_name("agent", agent.pk, taken), "has no visible character or is too long once normalised"
    if not agent.is_official and looks_reserved(keys):
        official = settings.OFFICIAL_AGENT_NAME
        return *_free_name("agent", agent.pk, taken), f"looks like the reserved name {official!r}"
    holder = taken.holder(keys)
    if holder is not None:
        return *_free_name(name, agent.pk, taken), f"reads or looks like the older {holder}"
    return name, keys, reason


def recompute_keys(apps, schema_editor):
    agent_model = apps.get_model("items", "Agent")
    taken = _Taken()
    for agent in agent_model.objects.order_by("-is_official", "pk").only("pk", "name", "is_official"):
        name, keys, reason = _resolve(agent, taken)
        if name != agent.name:
            print(f"\n  agent #{agent.pk}: name {agent.name!r} {reason}; renamed to {name!r}", end="")
        taken.add(keys, f"agent #{agent.pk} ({name!r})")
        agent_model.objects.filter(pk=agent.pk).update(name=name, name_key=keys.read, name_shape_key=keys.shape)


def restore_caseless_keys(apps, schema_editor):
    agent_model = apps.get_model("items", "Agent")
    for agent in agent_model.objects.only("pk", "name"):
        agent_model.objects.filter(pk=agent.pk).update(name_key=caseless(agent.name))


class Migration(migrations.Migration):
    dependencies = [("items", "0016_gin_indexes_without_pending_list")]

    operations = [
        # Off while the keys are rewritten row by row: a new key may equal another row's old one until that row's
        # turn comes.
        migrations.RemoveConstraint(model_name="agent", name="agent_name_key_unique"),
        migrations.AddField(
            model_name="agent",
            name="name_shape_key",
            field=models.CharField(editable=False, max_length=400, null=True),
        ),
        migrations.RunPython(recompute_keys, restore_caseless_keys),
        migrations.AlterField(
            model_name="agent",
            name="name_shape_key",
            field=models.CharField(
                editable=False,
                help_text="The name as written (items.names.name_shape_key: its look-alike skeleton, then caseless): unique.",
                max_length=400,
            ),
        ),
        migrations.AlterField(
            model_name="agent",
            name="name_key",
            field=models.CharField(
                editable=False,
                help_text="The name as read (items.names.name_key: caseless, then its look-alike skeleton): unique.",
                max_length=400,
            ),
        ),
        migrations.AddConstraint(
            model_name="agent",
            constraint=models.UniqueConstraint(fields=("name_key",), name="agent_name_key_unique"),
        ),
        migrations.AddConstraint(
            model_name="agent",
            constraint=models.UniqueConstraint(fields=("name_shape_key",), name="agent_name_shape_key_unique"),
        ),
        migrations.AddConstraint(
            model_name="agent",
            constraint=models.CheckConstraint(
                condition=models.Q(("name_shape_key", ""), _negated=True), name="agent_name_shape_key_set"
            ),
        ),
    ]
