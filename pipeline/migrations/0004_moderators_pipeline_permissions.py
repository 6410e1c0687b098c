"""The `moderators` group (items.0003) gets what it needs of the pipeline's admin: dead letters (browse, requeue,
resolve; also the live health page) and model calls (and the prompts page). Granted here so that the items app
never depends on the pipeline's migrations; adding a permission the group already has changes nothing."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP = "moderators"
CODENAMES = ["view_deadletter", "change_deadletter", "view_llmcall"]


def _permissions(apps, schema_editor):
    # Permissions are normally created after all migrations (post_migrate); make sure they exist now.
    app_config = apps.get_app_config("pipeline")
    app_config.models_module = True
    create_permissions(app_config, verbosity=0, apps=apps, using=schema_editor.connection.alias)
    app_config.models_module = None
    Permission = apps.get_model("auth", "Permission")
    found = list(Permission.objects.filter(content_type__app_label="pipeline", codename__in=CODENAMES))
    missing = set(CODENAMES) - {p.codename for p in found}
    if missing:
        raise RuntimeError(f"permissions missing for pipeline: {sorted(missing)}")
    return found


def grant(apps, schema_editor):
    group, _ = apps.get_model("auth", "Group").objects.get_or_create(name=GROUP)
    group.permissions.add(*_permissions(apps, schema_editor))


def revoke(apps, schema_editor):
    group = apps.get_model("auth", "Group").objects.filter(name=GROUP).first()
    if group is not None:
        group.permissions.remove(*_permissions(apps, schema_editor))


class Migration(migrations.Migration):
    dependencies = [
        ("pipeline", "0003_retention_and_hourly_model_calls"),
        ("items", "0003_moderators_group"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(grant, revoke)]
