"""Fixtures for the runtime tests: real run_pipeline processes, the test consumers' effect table, stream helpers."""

from __future__ import annotations

import json
import uuid

import pytest
from django.db import connection

from tests.pipeline.runtime.consumers import EFFECT_TABLE, TEST_TYPE
from tests.pipeline.runtime.fixtures import pipeline_env, run_pipeline  # noqa: F401 - fixtures re-exported

CONSUMER_MODULES = "tests.pipeline.runtime.consumers"


@pytest.fixture
def effects(transactional_db):
    """The test consumers' effect table (no unique key: a duplicate effect is a second row)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS {EFFECT_TABLE} "
            "(id bigserial PRIMARY KEY, event_id text NOT NULL, subject text NOT NULL, seq int NOT NULL, pid int)"
        )
        cursor.execute(f"TRUNCATE {EFFECT_TABLE}")

    class Effects:
        @staticmethod
        def rows() -> list[tuple[str, str, int, int]]:
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT event_id, subject, seq, pid FROM {EFFECT_TABLE} ORDER BY id")  # noqa: S608
                return cursor.fetchall()

        @staticmethod
        def count() -> int:
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT count(*) FROM {EFFECT_TABLE}")  # noqa: S608
                return cursor.fetchone()[0]

    return Effects


@pytest.fixture
def test_env(request):
    """pipeline_env plus the test consumers and short timings."""
    return {
        **request.getfixturevalue("pipeline_env"),
        "PIPELINE_EXTRA_CONSUMER_MODULES": CONSUMER_MODULES,
        "PIPELINE_LEASE_SECONDS": "1.5",
        "PIPELINE_BLOCK_MS": "200",
        "PIPELINE_GRACE_SECONDS": "10",
    }


def envelope(subject: str = "s1", event_type: str = TEST_TYPE, **data) -> dict[str, str]:
    event_id = str(uuid.uuid4())
    return {
        "specversion": "1.0",
        "id": event_id,
        "source": "urn:test",
        "type": event_type,
        "subject": subject,
        "time": "2026-01-01T00:00:00Z",
        "datacontenttype": "application/json",
        "data": json.dumps(data),
        "correlationid": event_id,
        "causationid": "",
        "traceparent": "",
        "replay": "",
    }
