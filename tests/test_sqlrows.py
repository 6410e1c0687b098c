"""eigenflux.base.sqlrows: the enrichment's prepared-shape statements write what the ORM would, through Django's
cursor wrapper (so execute wrappers still see them), with vectors in pgvector's binary format."""

from __future__ import annotations

import math

import pytest
from django.db import DataError, connection
from django.db.models import TextField
from django.test.utils import CaptureQueriesContext

from eigenflux.base.sqlrows import _VERBATIM, BinaryVector, _prep, insert_rows, server_bound_cursor, update_where
from items.models import ItemStatus, ModerationDecision, ProcessedItem
from items.selectors import most_similar
from tests.factories import make_completed_item, make_item

pytestmark = pytest.mark.django_db


def unit(i: int, dims: int = 384) -> list[float]:
    vector = [0.0] * dims
    vector[i] = 1.0
    return vector


def test_update_where_changes_only_matching_rows_and_counts_them():
    raw = make_item()
    where = {"raw": raw.pk, "status": ItemStatus.PENDING}
    assert update_where(ProcessedItem, {"last_error": "x", "extraction": {"a": [1]}}, where=where) == 1
    assert update_where(ProcessedItem, {"last_error": "y"}, where={**where, "status": ItemStatus.COMPLETED}) == 0
    item = ProcessedItem.objects.get(pk=raw.pk)
    assert (item.last_error, item.extraction) == ("x", {"a": [1]})


def test_a_vector_goes_in_binary_and_reads_back_as_written():
    raw = make_item()
    vector = [math.sin(i) for i in range(384)]
    assert update_where(ProcessedItem, {"embedding": vector}, where={"raw": raw.pk}) == 1
    stored = ProcessedItem.objects.get(pk=raw.pk).embedding
    assert [float(x) for x in stored] == pytest.approx(vector, abs=1e-6)  # float32, as pgvector stores it
    with server_bound_cursor() as cursor:
        cursor.execute("SELECT %s::vector(3)::text", [BinaryVector([0.5, -1.0, 2.0])])
        assert cursor.fetchone()[0] == "[0.5,-1,2]"


def test_most_similar_finds_the_nearest_completed_item():
    near = make_completed_item(embedding=unit(0))
    make_completed_item(embedding=unit(1))
    hit = most_similar(embedding=[0.9, 0.1] + [0.0] * 382, exclude_id=-1)
    assert hit is not None and hit.item_id == near.pk and hit.cosine == pytest.approx(0.9 / math.hypot(0.9, 0.1))
    assert most_similar(embedding=unit(0), exclude_id=near.pk).item_id != near.pk


def test_insert_rows_fills_defaults_and_can_ignore_conflicts_and_is_seen_by_execute_wrappers():
    raw = make_item()
    row = {"item_id": raw.pk, "actor": "pipeline", "stage": "safety", "verdict": "pass", "run": 1}
    with CaptureQueriesContext(connection) as queries:
        insert_rows(ModerationDecision, [row], ignore_conflicts=True)
        insert_rows(ModerationDecision, [row, {**row, "stage": "extraction"}], ignore_conflicts=True)
    assert len(queries) == 2 and all("ON CONFLICT DO NOTHING" in q["sql"] for q in queries.captured_queries)
    decisions = ModerationDecision.objects.filter(item_id=raw.pk).order_by("stage")
    assert [(d.stage, d.reason, d.moderator_id) for d in decisions] == [("extraction", "", None), ("safety", "", None)]
    assert all(d.created_at is not None for d in decisions)


def test_model_from_row_reads_a_row_as_the_orm_does():
    from eigenflux.base.sqlrows import model_columns, model_from_row

    raw = make_item()
    vector = [math.cos(i) for i in range(384)]
    values = {"pending_embedding": vector, "extraction": {"summary": "s", "keywords": ["k"]}, "safety_risk": 0.25}
    update_where(ProcessedItem, values, where={"raw": raw.pk})
    with server_bound_cursor() as cursor:
        sql = f"SELECT {model_columns(ProcessedItem, 'p')} FROM items_processeditem p WHERE raw_id = %s"  # noqa: S608
        cursor.execute(sql, [raw.pk])
        item = model_from_row(ProcessedItem, cursor.fetchone())
    orm = ProcessedItem.objects.get(pk=raw.pk)
    for field in ProcessedItem._meta.concrete_fields:
        ours, theirs = getattr(item, field.attname), getattr(orm, field.attname)
        if field.attname == "pending_embedding":
            assert [float(x) for x in ours] == pytest.approx([float(x) for x in theirs])
        else:
            assert ours == theirs, field.attname
    assert item.extraction == {"summary": "s", "keywords": ["k"]} and not item._state.adding


def test_update_carrying_writes_the_update_and_its_rows_in_one_statement():
    from django.utils.timezone import now

    from eigenflux.base.sqlrows import Rows, update_carrying
    from pipeline.models import LLMCall

    raw = make_item()
    decision = {"item_id": raw.pk, "actor": "pipeline", "stage": "safety", "verdict": "pass", "run": 1}
    call = {"prompt": "safety", "model": "m", "item_id": raw.pk, "latency_ms": 1.5, "outcome": "ok"}
    call["created_at"] = now()

    def write(status: str, stage: str) -> int:
        inserts = [
            # typed by casts: a moderator_id of None, a varchar, an int and a timestamp in a VALUES list
            Rows(ModerationDecision, [{**decision, "stage": stage}], ignore_conflicts=True, if_updated=True),
            Rows(LLMCall, [{**call, "prompt": stage}]),
        ]
        where = {"raw": raw.pk, "status": status}
        return update_carrying(ProcessedItem, {"last_error": stage}, where=where, inserts=inserts)

    with CaptureQueriesContext(connection) as queries:
        assert write(ItemStatus.PENDING, "safety") == 1
        assert write(ItemStatus.COMPLETED, "extraction") == 0  # no row matched
    assert len(queries) == 2
    assert ProcessedItem.objects.get(pk=raw.pk).last_error == "safety"
    # The decision only with the update that changed the row; the carried call rows either way.
    assert list(ModerationDecision.objects.filter(item_id=raw.pk).values_list("stage", flat=True)) == ["safety"]
    assert sorted(LLMCall.objects.filter(item_id=raw.pk).values_list("prompt", flat=True)) == ["extraction", "safety"]
    stored = ModerationDecision.objects.get(item_id=raw.pk)
    assert (stored.moderator_id, stored.verdict, stored.run) == (None, "pass", 1) and stored.created_at is not None


def test_a_values_insert_text_is_made_once_per_shape_for_few_rows_and_not_kept_for_a_large_batch():
    from eigenflux.base import sqlrows

    row = {"item_id": 1, "actor": "pipeline", "stage": "safety", "verdict": "pass", "run": 1}

    def two():
        return sqlrows.Rows(ModerationDecision, [row, row], ignore_conflicts=True, if_updated=True)

    first, params = sqlrows._insert_sql(two(), as_json=False, casts=True)
    again, _ = sqlrows._insert_sql(two(), as_json=False, casts=True)
    assert again is first  # the text (casts, VALUES list) was not built again
    assert first.count("CAST(") == len(params) and first.endswith("ON CONFLICT DO NOTHING")
    assert sqlrows._insert_sql(sqlrows.Rows(ModerationDecision, [row]), as_json=False)[0] != first  # another shape
    before = len(sqlrows._SQL)
    many = sqlrows.Rows(ModerationDecision, [row] * (sqlrows._KEPT_INSERT_ROWS + 1))
    assert sqlrows._insert_sql(many, as_json=False)[0].count("), (") == sqlrows._KEPT_INSERT_ROWS
    assert len(sqlrows._SQL) == before


def test_the_cached_statement_limit_is_psycopgs():
    """sqlrows keeps its own copy of a private psycopg constant: this fails when an upgrade of psycopg moves it."""
    from psycopg._queries import MAX_CACHED_STATEMENT_PARAMS

    from eigenflux.base import sqlrows

    assert sqlrows.PSYCOPG_CACHED_PARAMS == MAX_CACHED_STATEMENT_PARAMS


def test_rows_go_as_one_jsonb_parameter_only_where_values_would_pass_psycopgs_cached_statement_limit():
    from psycopg._queries import MAX_CACHED_STATEMENT_PARAMS

    from eigenflux.base import sqlrows

    row = {"item_id": 1, "actor": "pipeline", "stage": "safety", "verdict": "pass", "run": 1}
    per_row = len(sqlrows._insert_fields(ModerationDecision))
    fits = MAX_CACHED_STATEMENT_PARAMS // per_row
    assert not sqlrows._as_json(0, [sqlrows.Rows(ModerationDecision, [row] * fits)])
    assert sqlrows._as_json(0, [sqlrows.Rows(ModerationDecision, [row] * (fits + 1))])
    assert sqlrows._as_json(MAX_CACHED_STATEMENT_PARAMS - per_row + 1, [sqlrows.Rows(ModerationDecision, [row])])
    texts = set()
    for n in (1, 2, 40):  # as jsonb: one text and one parameter whatever the number of rows
        sql, params = sqlrows._insert_sql(
            sqlrows.Rows(ModerationDecision, [row] * n, ignore_conflicts=True), as_json=True
        )
        texts.add(sql)
        assert len(params) == 1 and len(params[0].obj) == n
    assert len(texts) == 1 and next(iter(texts)).endswith("ON CONFLICT DO NOTHING")


def test_rows_sent_as_json_read_back_as_the_orm_wrote_them():
    from datetime import UTC, datetime

    from items.models import OutboxEvent

    raw = make_item()
    at = datetime(2026, 12, 3, 16, 5, 7, 123456, tzinfo=UTC)
    decision = {"item_id": raw.pk, "actor": "pipeline", "stage": "safety", "verdict": "pass", "run": 2,
                "reason": 'quote " backslash \\ ünïcødé 中文', "created_at": at}  # fmt: skip
    envelope = {"id": "e1", "data": {"n": 1.5, "list": [1, None, "x"], "nested": {"a": True}}}
    event = {"stream": "s", "event_id": "6f1c1f2e-8a43-4d0c-9f57-0b2f6d6d9d01", "event_type": "t", "subject": "1",
             "envelope": envelope, "created_at": at}  # fmt: skip
    # Six rows of ten values: past the cached-statement limit, so sent as jsonb (insert_rows decides as
    # update_carrying does); the event's row is sent as jsonb by the same function.
    with CaptureQueriesContext(connection) as queries:
        insert_rows(
            ModerationDecision, [decision] + [{**decision, "run": run, "moderator_id": None} for run in range(3, 8)]
        )
    assert "jsonb_populate_recordset" in queries.captured_queries[0]["sql"]
    from eigenflux.base.sqlrows import Rows, _insert_sql

    sql, params = _insert_sql(Rows(OutboxEvent, [event]), as_json=True)
    with server_bound_cursor() as cursor:
        cursor.execute(sql, params)
    stored = ModerationDecision.objects.get(item_id=raw.pk, stage="safety", run=2)
    assert (stored.reason, stored.created_at, stored.run, stored.moderator_id) == (decision["reason"], at, 2, None)
    written = OutboxEvent.objects.get(subject="1")
    assert written.envelope == envelope and written.created_at == at and str(written.event_id) == event["event_id"]
    assert written.dispatched_at is None and written.attempts == 0  # the defaults of the fields not named
    with pytest.raises(DataError):  # a value too long for its column is refused as by the ORM
        insert_rows(ModerationDecision, [{**decision, "stage": "x" * 17, "run": run} for run in range(10, 16)])


def test_a_json_fields_own_encoder_is_kept_in_a_json_row():
    import functools
    import json
    import uuid

    from django.core.serializers.json import DjangoJSONEncoder
    from psycopg.types.json import Jsonb

    from eigenflux.base.sqlrows import _json_value

    key = uuid.uuid4()
    assert _json_value(Jsonb({"a": [1]})) == {"a": [1]}
    assert _json_value(Jsonb({"k": key}, dumps=functools.partial(json.dumps, cls=DjangoJSONEncoder))) == {"k": str(key)}


@pytest.mark.parametrize("field_class", list(_VERBATIM))
@pytest.mark.parametrize("value", ["text", "", 7, True, None, 2.5])
def test_a_verbatim_value_is_what_the_fields_own_preparation_returns(field_class, value):
    field = field_class(null=True)
    expected = field.get_db_prep_save(value, connection)
    prepared = _prep(field, value, connection)
    assert prepared == expected
    assert type(prepared) is type(expected)


def test_a_str_for_a_text_column_skips_the_fields_preparation():
    field = TextField()

    def refuse(value, connection):
        raise AssertionError("prepared again")

    field.get_db_prep_save = refuse  # type: ignore[method-assign]
    assert _prep(field, "as it is", connection) == "as it is"
    with pytest.raises(AssertionError, match="prepared again"):
        _prep(field, 7, connection)
