"""Hot-path reads and writes as plain SQL statements, for code that runs several times per enriched item.

Django's query compiler builds an UPDATE or INSERT again on every call (about a millisecond of Python each time
in the enrichment handler, bench/pipeline_throughput.py). Here the statement text is made once per model and
column set and kept; values are still prepared by the model's fields, as the ORM would (a JSON field's value
is wrapped, a model instance given as its primary key), except vectors, which go in pgvector's binary format
(no text to format here and parse in PostgreSQL).

The statements are bound on the server (a psycopg Cursor on Django's connection; Django's own cursors bind on
the client, composing the SQL text in Python), so psycopg prepares each shape after a few runs on a connection
and PostgreSQL skips parsing and planning it (unless the connection is behind a pooler: DB_BEHIND_POOLER turns
preparing off). Django's cursor wrapper is kept: its execute wrappers (the dependency observer, test counters)
and error mapping still apply.
"""

from __future__ import annotations

import struct
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cache
from typing import Any

import numpy as np
import psycopg
from django.db import connection, models
from django.db.models.fields import AutoFieldMixin
from psycopg.adapt import Dumper
from psycopg.pq import Format
from psycopg.types import TypeInfo

VECTOR_FIELD = "VectorField"

_SQL: dict[tuple[Any, ...], str] = {}


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
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    with connection.wrap_database_errors:
        _with_vectors(connection.connection)  # before the cursor: it copies the connection's adapters
        raw = psycopg.Cursor(connection.connection)
        # Django's own (private) wrapping of a driver cursor, which django-stubs does not declare.
        cursor = connection._prepare_cursor(raw)  # type: ignore[attr-defined]
    with cursor:
        yield cursor


def _prep(field: models.Field, value: Any) -> Any:
    if isinstance(value, models.Model):
        value = value.pk
    if value is not None and type(field).__name__ == VECTOR_FIELD:
        return BinaryVector(value)
    return field.get_db_prep_save(value, connection)


def _qn(name: str) -> str:
    return connection.ops.quote_name(name)


def _column(field: models.Field) -> str:
    """A concrete field's column, quoted (only a field that is not stored in a column has none)."""
    if field.column is None:
        raise ValueError(f"{field} has no database column")
    return _qn(field.column)


def insert_rows(
    model: type[models.Model], rows: Sequence[Mapping[str, Any]], *, ignore_conflicts: bool = False
) -> None:
    """INSERT the rows (by field name or attname) in one statement; a field a row does not name gets its
    default. `ignore_conflicts`: ON CONFLICT DO NOTHING, as bulk_create(ignore_conflicts=True)."""
    if not rows:
        return
    fields = _insert_fields(model)
    key = ("insert", model, ignore_conflicts)
    head = _SQL.get(key)
    if head is None:
        columns = ", ".join(_column(f) for f in fields)
        head = _SQL[key] = f"INSERT INTO {_qn(model._meta.db_table)} ({columns}) VALUES "  # noqa: S608
    one = "(" + ", ".join(["%s"] * len(fields)) + ")"
    sql = head + ", ".join([one] * len(rows)) + (" ON CONFLICT DO NOTHING" if ignore_conflicts else "")
    params = []
    for row in rows:
        for field in fields:
            if field.name in row:
                value = row[field.name]
            elif field.attname in row:
                value = row[field.attname]
            else:
                value = field.get_default()
            params.append(_prep(field, value))
    with server_bound_cursor() as cursor:
        cursor.execute(sql, params)


def update_where(
    model: type[models.Model],
    values: Mapping[str, Any],
    *,
    where: Mapping[str, Any],
    expressions: Mapping[str, tuple[str, Sequence[Any]]] | None = None,
) -> int:
    """UPDATE the rows whose fields equal `where` (all of them), setting `values` (by field name or attname)
    and `expressions` (column name -> (SQL, its parameters)); returns the number of rows changed."""
    fields = _fields(model)
    expressions = expressions or {}
    key = ("update", model, tuple(values), tuple(expressions), tuple(where))
    sql = _SQL.get(key)
    if sql is None:
        sets = [f"{_column(fields[name])} = %s" for name in values]
        sets += [f"{_column(fields[name])} = {expression}" for name, (expression, _) in expressions.items()]
        conditions = " AND ".join(f"{_column(fields[name])} = %s" for name in where)
        sql = _SQL[key] = f"UPDATE {_qn(model._meta.db_table)} SET {', '.join(sets)} WHERE {conditions}"  # noqa: S608
    params = [_prep(fields[name], value) for name, value in values.items()]
    for _, expression_params in expressions.values():
        params.extend(expression_params)
    params += [_prep(fields[name], value) for name, value in where.items()]
    with server_bound_cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


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
    row = []
    for (column, converters), value in zip(readers, values, strict=False):
        for convert in converters:
            value = convert(value, column, connection)
        row.append(value)
    return model.from_db(connection.alias, names, row)
