"""Drop the outbox NOTIFY trigger of migration 0007: the publisher wakes the relays itself, as OUTBOX_WAKEUP says.

A NOTIFY inside the publishing transaction makes every such commit take a database-wide lock until it is durable,
which serialises publishers; sending it after COMMIT (coalesced), or not at all (the relays poll), is a setting
chosen at run time rather than a trigger chosen by a migration. Reversing restores the trigger exactly.
"""

from django.db import migrations

CHANNEL = "eigenflux_outbox"  # items.outbox.NOTIFY_CHANNEL

DROP = """
DROP TRIGGER IF EXISTS eigenflux_outbox_notify ON items_outboxevent;
DROP FUNCTION IF EXISTS eigenflux_outbox_notify();
"""

RESTORE = f"""
CREATE OR REPLACE FUNCTION eigenflux_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{CHANNEL}', '');
    RETURN NULL;
END;
$$;
CREATE TRIGGER eigenflux_outbox_notify AFTER INSERT ON items_outboxevent
    FOR EACH STATEMENT EXECUTE FUNCTION eigenflux_outbox_notify();
"""


class Migration(migrations.Migration):
    dependencies = [("items", "0014_decision_embedding_stage_and_time")]

    operations = [migrations.RunSQL(DROP, RESTORE)]
