"""Wake the outbox relays from inside PostgreSQL: a statement-level trigger NOTIFYs on every outbox insert.

The notification is delivered when the transaction commits (never for one that rolls back), and it costs
the publishing process no extra round trip; PostgreSQL folds repeats within a transaction into one.
"""

from django.db import migrations

CHANNEL = "eigenflux_outbox"  # items.outbox.NOTIFY_CHANNEL

FORWARD = f"""
CREATE OR REPLACE FUNCTION eigenflux_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{CHANNEL}', '');
    RETURN NULL;
END;
$$;
CREATE TRIGGER eigenflux_outbox_notify AFTER INSERT ON items_outboxevent
    FOR EACH STATEMENT EXECUTE FUNCTION eigenflux_outbox_notify();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS eigenflux_outbox_notify ON items_outboxevent;
DROP FUNCTION IF EXISTS eigenflux_outbox_notify();
"""


class Migration(migrations.Migration):
    dependencies = [("items", "0006_outbox_backoff")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
