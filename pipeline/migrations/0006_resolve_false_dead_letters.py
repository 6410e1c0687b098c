"""Closes the false dead letters of versions before event routing by intent: events of a type their stream carries,
dead-lettered by a group that does not handle them (docs/stream-runtime.md#event-types-what-a-group-handles-and-what-it-leaves)."""

from django.db import migrations


def resolve_not_handled(apps, schema_editor):
    from pipeline.dead_letter_table import dead_letters_resolve_not_handled

    dead_letters_resolve_not_handled(model=apps.get_model("pipeline", "DeadLetter"))


class Migration(migrations.Migration):
    dependencies = [("pipeline", "0005_llm_call_names")]

    operations = [migrations.RunPython(resolve_not_handled, migrations.RunPython.noop)]
