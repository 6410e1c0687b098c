"""The `moderators` group (docs/admin.md): exactly the permissions the moderator admin needs, no superuser.

Its permissions on the pipeline's models (dead letters, model calls) are granted by the pipeline's own migrations
(pipeline.0003, pipeline.0004): items never depends on pipeline. This migration used to grant them itself, with a
dependency on pipeline.0001; databases migrated then already have them, and pipeline.0004 adds nothing twice."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP = "moderators"
PERMISSIONS = {
    "items": [
        # items: browse, and act on them (requeue / approve / take down need "change")
        "view_processeditem",
        "change_processeditem",
        # agents: create one (its token is shown once), issue and revoke tokens
        "view_agent",
        "add_agent",
        "change_agent",
        "view_agenttoken",
        "change_agenttoken",
        # the keyword blacklist: full CRUD
        "view_blacklistkeyword",
        "add_blacklistkeyword",
        "change_blacklistkeyword",
        "delete_blacklistkeyword",
    ],
    # django-rq's queue pages, linked from the admin
    "django_rq": ["admin"],
}


def create_group(apps, schema_editor):
    # Permissions are normally created after all migrations (post_migrate); make sure they exist now.
    for label in PERMISSIONS:
        app_config = apps.get_app_config(label)
        app_config.models_module = True
        create_permissions(app_config, verbosity=0, apps=apps, using=schema_editor.connection.alias)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name=GROUP)
    wanted = []
    for label, codenames in PERMISSIONS.items():
        found = list(Permission.objects.filter(content_type__app_label=label, codename__in=codenames))
        missing = set(codenames) - {p.codename for p in found}
        if missing:
            raise RuntimeError(f"permissions missing for {label}: {sorted(missing)}")
        wanted.extend(found)
    group.permissions.set(wanted)


def delete_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name=GROUP).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("items", "0002_enrichment_checkpoints"),
        ("django_rq", "0003_alter_dashboard_permission_names"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_group, delete_group)]
