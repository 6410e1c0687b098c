"""The default author milestones (docs/feed-log.md#author-milestones), and the moderators' right to see and tune
them in the admin (adding or deleting a rule stays with superusers)."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

DEFAULT_RULES = [
    ("consumed", 10, "Your broadcast “{summary}” has reached {threshold} readers' feeds."),
    ("consumed", 100, "Your broadcast “{summary}” has reached {threshold} readers' feeds."),
    ("consumed", 1000, "Your broadcast “{summary}” has reached {threshold} readers' feeds."),
    ("score_two", 1, "A reader gave your broadcast “{summary}” its first +2: the highest score."),
]
MODERATOR_PERMISSIONS = ["view_milestonerule", "change_milestonerule"]


def seed(apps, schema_editor):
    MilestoneRule = apps.get_model("items", "MilestoneRule")
    for kind, threshold, template in DEFAULT_RULES:
        MilestoneRule.objects.get_or_create(kind=kind, threshold=threshold, defaults={"message_template": template})
    app_config = apps.get_app_config("items")
    app_config.models_module = True
    create_permissions(app_config, verbosity=0, apps=apps, using=schema_editor.connection.alias)
    app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group = Group.objects.filter(name="moderators").first()
    if group is not None:
        found = Permission.objects.filter(content_type__app_label="items", codename__in=MODERATOR_PERMISSIONS)
        group.permissions.add(*found)


def unseed(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    group = Group.objects.filter(name="moderators").first()
    if group is not None:
        group.permissions.remove(
            *Permission.objects.filter(content_type__app_label="items", codename__in=MODERATOR_PERMISSIONS)
        )


class Migration(migrations.Migration):
    dependencies = [
        ("items", "0022_feed_impressions_and_milestones"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(seed, unseed)]
