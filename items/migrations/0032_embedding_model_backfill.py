"""Provenance for the vectors stored before there was any: assumed, not known. Vectors written before provenance
came from the model configured at upgrade (the settings this migration runs with). An operator who changed the
embedding model earlier without re-embedding clears the stamp and re-embeds everything
(docs/operations.md#changing-the-embedding-model)."""

from django.db import migrations

from eigenflux.base.embedding_space import configured_embedding_model


def assume_configured_model(apps, schema_editor):
    model = configured_embedding_model()
    ProcessedItem = apps.get_model("items", "ProcessedItem")
    ReaderProfile = apps.get_model("items", "ReaderProfile")
    # One statement per table: a row whose only change is this unindexed column can be updated in place (HOT) when
    # its page has room; on a large table a long, one-off rewrite (docs/operations.md#changing-the-embedding-model).
    ProcessedItem.objects.filter(embedding_model="").exclude(embedding=None, pending_embedding=None).update(
        embedding_model=model
    )
    ReaderProfile.objects.filter(embedding_model="").exclude(seeks_embedding=None, offers_embedding=None).update(
        embedding_model=model
    )


def forget(apps, schema_editor):
    for name in ("ProcessedItem", "ReaderProfile"):
        apps.get_model("items", name).objects.update(embedding_model="")


class Migration(migrations.Migration):
    dependencies = [("items", "0031_embedding_model")]

    operations = [migrations.RunPython(assume_configured_model, forget)]
