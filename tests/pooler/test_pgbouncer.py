"""EigenFlux behind PgBouncer in transaction mode: the whole delivery path (outbox -> relay -> enrichment ->
outcome events) runs with DATABASE_URL on the pooler, and only what needs a session (the relay's LISTEN,
migrations) uses DATABASE_DIRECT_URL."""

from __future__ import annotations

from collections import Counter

import pytest
from django.db import connection

from eigenflux.base.dbpool import db_settings
from items.events import OUTCOME_TYPES, STREAM_ITEM_EVENTS
from items.models import ItemStatus, ProcessedItem
from tests.factories import make_agent, make_item
from tests.pipeline.runtime.fixtures import database_url

pytestmark = pytest.mark.slow


def test_behind_a_pooler_nothing_prepares_statements_or_holds_cursors():
    config = db_settings(
        "postgresql://u@h:6432/db",
        pool=True,
        min_size=1,
        max_size=2,
        timeout=1,
        conn_max_age=0,
        application_name="x",
        behind_pooler=True,
    )
    assert config["OPTIONS"]["prepare_threshold"] is None and config["DISABLE_SERVER_SIDE_CURSORS"] is True
    plain = db_settings(
        "postgresql://u@h/db", pool=True, min_size=1, max_size=2, timeout=1, conn_max_age=0, application_name="x"
    )
    assert "prepare_threshold" not in plain["OPTIONS"] and not plain.get("DISABLE_SERVER_SIDE_CURSORS")


def test_the_delivery_path_runs_through_pgbouncer_in_transaction_mode(
    pgbouncer, run_pipeline, fake_llm, redis_client, transactional_db
):
    database = connection.settings_dict["NAME"]
    before = pgbouncer.stats(database).get("total_xact_count", 0)
    author, _ = make_agent()
    pks = [make_item(author, f"Pooled broadcast {i}: renting a GPU in city {i}").pk for i in range(8)]
    process = run_pipeline(
        "--burst",
        "--consumer",
        "item-publish",
        "--concurrency",
        "4",
        env={
            **fake_llm.env(),
            "DATABASE_URL": pgbouncer.url(database),
            "DATABASE_DIRECT_URL": database_url(connection.settings_dict),
            "PIPELINE_EXTRA_CONSUMER_MODULES": "pipeline.consumers.item_publish",
            "PIPELINE_LEASE_SECONDS": "5",
        },
    )
    assert process.wait(120) == 0, process.output()[-4000:]
    output = process.output()
    assert "prepared statement" not in output and "LISTEN failed" not in output, output[-4000:]
    assert ProcessedItem.objects.filter(pk__in=pks, status=ItemStatus.COMPLETED).count() == len(pks)
    outcomes = Counter(
        fields["subject"] for _, fields in redis_client.xrange(STREAM_ITEM_EVENTS) if fields["type"] in OUTCOME_TYPES
    )
    assert outcomes == Counter({str(pk): 1 for pk in pks})
    # The work really went through the pooler (hundreds of transactions), in transaction mode.
    assert pgbouncer.stats(database)["total_xact_count"] - before > 8 * 5


def test_migrate_uses_the_direct_connection_when_one_is_set(pgbouncer, pipeline_env):
    import subprocess
    import sys

    from tests.pipeline.runtime.fixtures import REPO

    env = {**pipeline_env, "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/nowhere"}
    env["DATABASE_DIRECT_URL"] = pipeline_env["DATABASE_URL"]
    result = subprocess.run(
        [sys.executable, str(REPO / "manage.py"), "migrate", "--check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr  # the unreachable DATABASE_URL was not used


def _interleave(url: str, prepare_threshold: int | None) -> None:
    """Two clients take turns through the pooler, each running one statement per transaction."""
    import psycopg

    with (
        psycopg.connect(url, autocommit=True, prepare_threshold=prepare_threshold) as a,
        psycopg.connect(url, autocommit=True, prepare_threshold=prepare_threshold) as b,
    ):
        for i in range(6):
            assert a.execute("SELECT %s::int", [i]).fetchone() == (i,)
            assert b.execute("SELECT %s::int + 1", [i]).fetchone() == (i + 1,)


def test_prepared_statements_break_under_transaction_pooling_and_the_pooler_setting_turns_them_off(
    pgbouncer, transactional_db
):
    import psycopg

    url = pgbouncer.url(connection.settings_dict["NAME"])
    with pytest.raises(psycopg.errors.DuplicatePreparedStatement):
        _interleave(url, prepare_threshold=0)  # psycopg prepares (its default: from a query's 5th run)
    options = db_settings(
        url, pool=False, min_size=0, max_size=1, timeout=1, conn_max_age=0, application_name="x", behind_pooler=True
    )["OPTIONS"]
    _interleave(url, prepare_threshold=options["prepare_threshold"])


def test_the_publishers_after_commit_notify_goes_through_the_pooler(pgbouncer, pipeline_env):
    """OUTBOX_WAKEUP=after-commit behind PgBouncer: the NOTIFY a publisher sends on its pooled connection once its
    transaction committed reaches a relay LISTENing on PostgreSQL directly."""
    import subprocess
    import sys

    import psycopg

    from tests.pipeline.runtime.fixtures import REPO

    database = connection.settings_dict["NAME"]
    before = pgbouncer.stats(database).get("total_xact_count", 0)
    code = (
        "from django.db import transaction\n"
        "from items.outbox import outbox_event_create\n"
        "with transaction.atomic():\n"
        "    outbox_event_create(stream='test:pooled', event_type='io.eigenflux.test.v1', subject='s', data={})\n"
    )
    env = {
        **pipeline_env,
        "DATABASE_URL": pgbouncer.url(database),
        "DATABASE_DIRECT_URL": pipeline_env["DATABASE_URL"],
        "OUTBOX_WAKEUP": "after-commit",
    }
    with psycopg.connect(pipeline_env["DATABASE_URL"], autocommit=True) as listener:
        listener.execute("LISTEN eigenflux_outbox")
        result = subprocess.run(
            [sys.executable, str(REPO / "manage.py"), "shell", "-c", code],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert "could not NOTIFY" not in result.stderr, result.stderr
        assert sum(1 for _ in listener.notifies(timeout=2.0)) == 1
    assert pgbouncer.stats(database)["total_xact_count"] - before >= 2  # the insert's transaction, then the NOTIFY
