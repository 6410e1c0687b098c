"""Hot-path reads and writes as plain SQL statements, for code that runs several times per enriched item.

Django's query compiler builds an UPDATE or INSERT again on every call (about a millisecond of Python each time
in the enrichment handler, bench/pipeline_throughput.py). Here the statement text is made once per model and
column set and kept; values are still prepared by the model's fields, as the ORM would (a JSON field's value
is wrapped, a model instance given as its primary key), except vectors, which go in pgvector's binary format
(no text to format here and parse in PostgreSQL). Inserted rows go as VALUES lists, or, where those would make
a statement psycopg parses again on every call (over 50 parameters), as one jsonb parameter per INSERT (_as_json).

The statements are bound on the server (a psycopg Cursor on Django's connection; Django's own cursors bind on
the client, composing the SQL text in Python), so psycopg prepares each shape after a few runs on a connection
and PostgreSQL skips parsing and planning it (unless the connection is behind a pooler: DB_BEHIND_POOLER turns
preparing off). Django's cursor wrapper is kept: its execute wrappers (the dependency observer, test counters)
and error mapping still apply.
"""

from __future__ import annotations

import json
import re
import struct
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from functools import cache
from typing import Any
from uuid import UUID

import numpy as np
import psycopg
from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.fields import AutoFieldMixin
from psycopg.adapt import Dumper
from psycopg.pq import Format
from psycopg.types import TypeInfo
from psycopg.types.json import Jsonb

VECTOR_FIELD = "VectorField"

_SQL: dict[tuple[Any, ...], str] = {}
_KEPT_INSERT_ROWS = 16  # VALUES texts are kept for up to this many rows (a checkpoint's decisions and calls)
# psycopg keeps the parsed form of a statement with at most this many parameters and parses a larger one again on
# every call (its private psycopg._queries.MAX_CACHED_STATEMENT_PARAMS; tests/test_sqlrows.py checks they agree).
PSYCOPG_CACHED_PARAMS = 50


@cache
def _fields(model: type[models.Model]) -> dict[str, models.Field]:
    """The model's concrete fields by name and by attname (`item` and `item_id` both name the foreign key)."""
    fields: dict[str, models.Field] = {}
    for field in model._meta.concrete_fields:
        fields[field.name] = field
        fields[field.attname] = field
    return fields


@cache
def _insert_fields(model: type[models.Model]) -> tuple[models.Field, ...]:
    pk = model._meta.pk
    return tuple(f for f in model._meta.concrete_fields if not (f is pk and isinstance(f, AutoFieldMixin)))


class BinaryVector:
    """A vector parameter sent in pgvector's binary format (a header, then big-endian float32s)."""

    __slots__ = ("values",)

    def __init__(self, values: Any):
        self.values = np.asarray(values, dtype=">f4")


class _VectorBinaryDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj: BinaryVector) -> bytes:
        return struct.pack(">HH", len(obj.values), 0) + obj.values.tobytes()


_vector_ready: weakref.WeakSet[psycopg.Connection[Any]] = weakref.WeakSet()


def _with_vectors(conn: psycopg.Connection[Any]) -> None:
    """Teach this connection to send BinaryVector (once per physical connection: the type's oid is per database)."""
    if conn in _vector_ready:
        return
    info = TypeInfo.fetch(conn, "vector")
    if info is not None:
        conn.adapters.register_dumper(BinaryVector, type("VectorDumper", (_VectorBinaryDumper,), {"oid": info.oid}))
    _vector_ready.add(conn)


@contextmanager
def server_bound_cursor() -> Iterator[Any]:
    """A cursor binding parameters on the server (and so taking BinaryVector), wrapped as Django's own."""
    db = _db()
    db.close_if_health_check_failed()
    db.ensure_connection()
    with db.wrap_database_errors:
        _with_vectors(db.connection)  # before the cursor: it copies the connection's adapters
        raw = psycopg.Cursor(db.connection)
        # Django's own (private) wrapping of a driver cursor, which django-stubs does not declare.
        cursor = db._prepare_cursor(raw)  # type: ignore[attr-defined]
    with cursor:
        yield cursor


def _db() -> BaseDatabaseWrapper:
    """This thread's default database wrapper, looked up once per statement: `django.db.connection` is a proxy
    that looks it up again (a context-local read) on every attribute, and a field's preparation reads several."""
    return connections[DEFAULT_DB_ALIAS]


# Fields whose preparation returns a value of this exact type as it is (to_python and get_prep_value pass a str
# through; integers are not among them: PostgreSQL's operations wrap them in psycopg's sized types). A third of
# the values an enriched item writes.
_VERBATIM: dict[type[models.Field], type] = {models.CharField: str, models.TextField: str}


def _prep(field: models.Field, value: Any, db: BaseDatabaseWrapper) -> Any:
    if type(value) is _VERBATIM.get(type(field)):
        return value
    if isinstance(value, models.Model):
        value = value.pk
    if value is not None and type(field).__name__ == VECTOR_FIELD:
        return BinaryVector(value)
    return field.get_db_prep_save(value, db)


def _qn(name: str) -> str:
    return connection.ops.quote_name(name)


def _column(field: models.Field) -> str:
    """A concrete field's column, quoted (only a field that is not stored in a column has none)."""
    if field.column is None:
        raise ValueError(f"{field} has no database column")
    return _qn(field.column)


@dataclass(frozen=True)
class Rows:
    """Rows to insert into `model` (by field name or attname; a field a row does not name gets its default).
    `ignore_conflicts`: ON CONFLICT DO NOTHING. `if_updated`: in update_carrying(), only when its update
    changed a row."""

    model: type[models.Model]
    rows: Sequence[Mapping[str, Any]]
    ignore_conflicts: bool = False
    if_updated: bool = False


@dataclass(frozen=True)
class Carried:
    """Rows a caller hands to another write, to go in its statement, and what to call once they are committed."""

    rows: Rows
    written: Callable[[], None]


def _plain(value: Any) -> Any:
    """json.dumps' fallback for the values a field prepares that JSON has no type for (PostgreSQL reads each
    back from its text: a timestamp keeps its microseconds and its offset)."""
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, UUID | Decimal):
        return str(value)
    raise TypeError(f"cannot send {type(value).__name__} in a JSON row")


def _json_value(value: Any) -> Any:
    """A prepared value as it goes into a JSON row: a JSON field's wrapper (psycopg's Jsonb) gives its document."""
    if isinstance(value, Jsonb):
        return value.obj if value.dumps in (None, json.dumps) else json.loads(value.dumps(value.obj))
    return value


def _rows_json(rows: list[dict[str, Any]]) -> str:
    return json.dumps(rows, default=_plain, separators=(",", ":"), allow_nan=False)


def _cast_type(field: models.Field) -> str:
    """The column's type for an explicit cast (a varchar's length dropped: the column itself still checks it)."""
    return re.sub(r"^(varchar|character varying)\(\d+\)$", r"\1", str(field.db_type(connection)))


def _values_text(model: type[models.Model], fields: tuple[models.Field, ...], n: int, rows: Rows, casts: bool) -> str:
    """The INSERT's text for `n` rows as a VALUES list, kept per shape (model, row count, conflict and update
    options) for the few-row inserts of the hot path; a larger batch's text is made each time."""
    key = ("insert", model, n, rows.ignore_conflicts, rows.if_updated, casts)
    sql = _SQL.get(key)
    if sql is None:
        columns = ", ".join(_column(f) for f in fields)
        head = f"INSERT INTO {_qn(model._meta.db_table)} ({columns}) "
        if casts:
            one = "(" + ", ".join(f"CAST(%s AS {_cast_type(f)})" for f in fields) + ")"
        else:
            one = "(" + ", ".join(["%s"] * len(fields)) + ")"
        values = ", ".join([one] * n)
        if rows.if_updated:
            sql = f"{head}SELECT * FROM (VALUES {values}) AS v WHERE EXISTS (SELECT FROM updated)"  # noqa: S608
        else:
            sql = f"{head}VALUES {values}"
        sql += " ON CONFLICT DO NOTHING" if rows.ignore_conflicts else ""
        if n <= _KEPT_INSERT_ROWS:
            _SQL[key] = sql
    return sql


def _json_text(model: type[models.Model], fields: tuple[models.Field, ...], rows: Rows) -> str:
    """The INSERT's text with its rows as ONE jsonb parameter (a JSON array of objects keyed by column), which
    PostgreSQL expands into the table's row type (jsonb_populate_recordset), converting each value with its
    column's own type: one text per model and options, whatever the number of rows."""
    key = ("insert-json", model, rows.ignore_conflicts, rows.if_updated)
    sql = _SQL.get(key)
    if sql is None:
        table = _qn(model._meta.db_table)
        columns = ", ".join(_column(f) for f in fields)
        selected = ", ".join(f"r.{_column(f)}" for f in fields)
        sql = f"INSERT INTO {table} ({columns}) SELECT {selected} FROM jsonb_populate_recordset(NULL::{table}, %s) r"  # noqa: S608
        sql += " WHERE EXISTS (SELECT FROM updated)" if rows.if_updated else ""
        sql += " ON CONFLICT DO NOTHING" if rows.ignore_conflicts else ""
        _SQL[key] = sql
    return sql


def _row_values(
    fields: tuple[models.Field, ...], row: Mapping[str, Any], db: BaseDatabaseWrapper
) -> Iterator[tuple[models.Field, Any]]:
    for field in fields:
        if field.name in row:
            value = row[field.name]
        elif field.attname in row:
            value = row[field.attname]
        else:
            value = field.get_default()
        yield field, _prep(field, value, db)


def _insert_sql(rows: Rows, *, as_json: bool, casts: bool = False) -> tuple[str, list[Any]]:
    """The INSERT of `rows` and its parameters: a VALUES list (`casts`: each value cast to its column's type,
    for a VALUES list read by a SELECT, where PostgreSQL cannot take the types from the target columns), or
    `as_json` the rows as one jsonb parameter."""
    fields = _insert_fields(rows.model)
    db = _db()
    if as_json:
        documents = [
            {field.column: _json_value(value) for field, value in _row_values(fields, row, db)} for row in rows.rows
        ]
        return _json_text(rows.model, fields, rows), [Jsonb(documents, dumps=_rows_json)]
    params = [value for row in rows.rows for _, value in _row_values(fields, row, db)]
    return _values_text(rows.model, fields, len(rows.rows), rows, casts), params


def _as_json(fixed_params: int, inserts: Sequence[Rows]) -> bool:
    """Whether a statement's inserted rows go as jsonb: when as VALUES lists the statement would have more
    parameters than psycopg keeps the parsed form of (it parses such a statement's text again on every call:
    the completion's 69 parameters cost about 0.12 ms of Python each time). Within the limit VALUES are cheaper
    to send (psycopg's own dumpers; no JSON to write), so the checkpoints keep them."""
    values = fixed_params + sum(len(rows.rows) * len(_insert_fields(rows.model)) for rows in inserts)
    return values > PSYCOPG_CACHED_PARAMS


def insert_rows(
    model: type[models.Model], rows: Sequence[Mapping[str, Any]], *, ignore_conflicts: bool = False
) -> None:
    """INSERT the rows (by field name or attname) in one statement; a field a row does not name gets its
    default. `ignore_conflicts`: ON CONFLICT DO NOTHING, as bulk_create(ignore_conflicts=True)."""
    if not rows:
        return
    batch = Rows(model, rows, ignore_conflicts=ignore_conflicts)
    sql, params = _insert_sql(batch, as_json=_as_json(0, [batch]))
    with server_bound_cursor() as cursor:
        cursor.execute(sql, params)


def _update_sql(
    model: type[models.Model],
    values: Mapping[str, Any],
    where: Mapping[str, Any],
    expressions: Mapping[str, tuple[str, Sequence[Any]]],
) -> tuple[str, list[Any]]:
    fields = _fields(model)
    key = ("update", model, tuple(values), tuple(expressions), tuple(where))
    sql = _SQL.get(key)
    if sql is None:
        sets = [f"{_column(fields[name])} = %s" for name in values]
        sets += [f"{_column(fields[name])} = {expression}" for name, (expression, _) in expressions.items()]
        conditions = " AND ".join(f"{_column(fields[name])} = %s" for name in where)
        sql = _SQL[key] = f"UPDATE {_qn(model._meta.db_table)} SET {', '.join(sets)} WHERE {conditions}"  # noqa: S608
    db = _db()
    params = [_prep(fields[name], value, db) for name, value in values.items()]
    for _, expression_params in expressions.values():
        params.extend(expression_params)
    params += [_prep(fields[name], value, db) for name, value in where.items()]
    return sql, params


def update_where(
    model: type[models.Model],
    values: Mapping[str, Any],
    *,
    where: Mapping[str, Any],
    expressions: Mapping[str, tuple[str, Sequence[Any]]] | None = None,
) -> int:
    """UPDATE the rows whose fields equal `where` (all of them), setting `values` (by field name or attname)
    and `expressions` (column name -> (SQL, its parameters)); returns the number of rows changed."""
    sql, params = _update_sql(model, values, where, expressions or {})
    with server_bound_cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def update_carrying(
    model: type[models.Model],
    values: Mapping[str, Any],
    *,
    where: Mapping[str, Any],
    inserts: Sequence[Rows],
    expressions: Mapping[str, tuple[str, Sequence[Any]]] | None = None,
) -> int:
    """update_where() and the `inserts` in ONE statement (data-modifying WITH clauses): one round trip and,
    outside a transaction, one transaction of its own, where an atomic block would cost BEGIN, a statement per
    write and COMMIT. Inserts marked `if_updated` happen only when the update changed a row; the others always
    do. Returns the number of rows the update changed."""
    inserts = [rows for rows in inserts if rows.rows]
    if not inserts:
        return update_where(model, values, where=where, expressions=expressions)
    update, params = _update_sql(model, values, where, expressions or {})
    parts = [f"updated AS ({update} RETURNING 1)"]
    as_json = _as_json(len(params), inserts)
    for n, rows in enumerate(inserts):
        sql, insert_params = _insert_sql(rows, as_json=as_json, casts=rows.if_updated)
        parts.append(f"insert_{n} AS ({sql})")
        params += insert_params
    with server_bound_cursor() as cursor:
        cursor.execute(f"WITH {', '.join(parts)} SELECT count(*) FROM updated", params)  # noqa: S608
        row = cursor.fetchone()
        return int(row[0]) if row else 0


@cache
def _readers(model: type[models.Model]) -> tuple[tuple[str, ...], tuple[tuple[Any, tuple[Any, ...]], ...]]:
    """The model's concrete fields' attnames, and per field its column expression and from-database converters."""
    table = model._meta.db_table
    fields = model._meta.concrete_fields
    converters = tuple((f.get_col(table), tuple(f.get_db_converters(connection))) for f in fields)
    return tuple(f.attname for f in fields), converters


def model_columns(model: type[models.Model], alias: str) -> str:
    """`alias.column, …` for the model's concrete fields, in the order model_from_row reads them."""
    return ", ".join(f"{alias}.{_column(f)}" for f in model._meta.concrete_fields)


def model_from_row(model: type[models.Model], values: Sequence[Any]) -> Any:
    """A model instance from a row of model_columns() (extra values after them are ignored), each value passed
    through its field's converters as the ORM's compiler would (a vector parsed, JSON decoded): a read without
    a QuerySet, for a statement on the hot path."""
    names, readers = _readers(model)
    db = _db()
    row = []
    for (column, converters), value in zip(readers, values, strict=False):
        for convert in converters:
            value = convert(value, column, db)
        row.append(value)
    return model.from_db(db.alias, names, row)
