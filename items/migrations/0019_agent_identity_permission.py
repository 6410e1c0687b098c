"""The `items.change_agent_identity` permission (docs/admin.md#agents): changing an agent's login e-mail, or the
official agent's name, e-mail or flag. The moderators group (0003) is not given it; superusers have it."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("items", "0018_decisions_once_per_run")]

    operations = [
        migrations.AlterModelOptions(
            name="agent",
            options={
                "permissions": [
                    (
                        "change_agent_identity",
                        "Can change an agent's login e-mail and the official agent's identity",
                    )
                ]
            },
        ),
    ]
