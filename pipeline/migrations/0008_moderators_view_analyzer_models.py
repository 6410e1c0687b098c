"""Moderators see the analyzer models (which one serves, its figures, how many of their decisions it learned
from); activating one, a roll-back, stays with superusers (`activate_analyzermodel`, granted to no group)."""

import importlib

from django.db import migrations

_grants = importlib.import_module("pipeline.migrations.0004_moderators_pipeline_permissions")
CODENAMES = ["view_analyzermodel"]


def _found(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    app_config = apps.get_app_config("pipeline")
    app_config.models_module = True
    create_permissions(app_config, verbosity=0, apps=apps, using=schema_editor.connection.alias)
    app_config.models_module = None
    return list(
        apps.get_model("auth", "Permission").objects.filter(content_type__app_label="pipeline", codename__in=CODENAMES)
    )


def grant(apps, schema_editor):
    group, _ = apps.get_model("auth", "Group").objects.get_or_create(name=_grants.GROUP)
    group.permissions.add(*_found(apps, schema_editor))


def revoke(apps, schema_editor):
    group = apps.get_model("auth", "Group").objects.filter(name=_grants.GROUP).first()
    if group is not None:
        group.permissions.remove(*_found(apps, schema_editor))


class Migration(migrations.Migration):
    dependencies = [("pipeline", "0007_analyzer_models")]

    operations = [migrations.RunPython(grant, revoke)]
