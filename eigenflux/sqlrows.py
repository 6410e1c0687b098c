"""Hot-path reads and writes as plain SQL statements, for code that runs several times per enriched item.

Django's query compiler builds an UPDATE or INSERT again on every call (about a millisecond of Python each time
in the enrichment handler, bench/pipeline_throughput.py). Here the statement text is made once per model and
column set and kept; values are still prepared by the model's fields, as the ORM would (a JSON field's value
is wrapped, a vector serialised, a model instance given as its primary key). Statements go through Django's
cursor, so its execute wrappers (the dependency observer, test counters) and error mapping still apply.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from django.db import connection, models
from django.db.models.fields import AutoFieldMixin

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


def _prep(field: models.Field, value: Any) -> Any:
    if isinstance(value, models.Model):
        value = value.pk
    return field.get_db_prep_save(value, connection)


def _qn(name: str) -> str:
    return connection.ops.quote_name(name)


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
        columns = ", ".join(_qn(f.column) for f in fields)
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
    with connection.cursor() as cursor:
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
        sets = [f"{_qn(fields[name].column)} = %s" for name in values]
        sets += [f"{_qn(fields[name].column)} = {expression}" for name, (expression, _) in expressions.items()]
        conditions = " AND ".join(f"{_qn(fields[name].column)} = %s" for name in where)
        sql = _SQL[key] = f"UPDATE {_qn(model._meta.db_table)} SET {', '.join(sets)} WHERE {conditions}"  # noqa: S608
    params = [_prep(fields[name], value) for name, value in values.items()]
    for _, expression_params in expressions.values():
        params.extend(expression_params)
    params += [_prep(fields[name], value) for name, value in where.items()]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount
