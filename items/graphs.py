"""Nearest-neighbour walks over the item table's HNSW graphs: one graph per broadcast type and none over all
items (items/models.py says why). A walk over every type is the four graphs' walks, each for its own nearest k,
merged by distance: when each walk finds its graph's true k nearest, the merge is the true k nearest of all, so
its recall is at least the per-type graphs' own (docs/performance.md, "One HNSW graph per item").

The type is written into each walk as a literal: a partial index is chosen only when the planner can prove its
predicate, which a parameter bound on the server (a generic plan) does not let it do."""

from __future__ import annotations

from collections.abc import Callable

from django.db.models import QuerySet

from items.models import BroadcastType

GRAPH_TYPES: tuple[str, ...] = tuple(BroadcastType.values)


def type_condition(kind: str, column: str = '"broadcast_type"') -> str:
    """SQL that lets the planner use `kind`'s graph: `column = 'kind'`, the type as a literal."""
    if kind not in GRAPH_TYPES:
        raise ValueError(f"unknown broadcast type {kind!r}; expected one of {', '.join(GRAPH_TYPES)}")
    return f"{column} = '{kind}'"


def each_graph_sql(
    walk: Callable[[str], str], *, columns: str, distance: str, limit: str, kind_column: str = '"broadcast_type"'
) -> str:
    """One SELECT over every type's graph: `walk(condition)` is a walk's SELECT (its own ORDER BY distance and
    LIMIT) restricted by `condition` (on `kind_column`) to one type; the walks' rows are merged and the `limit`
    nearest by their `distance` column kept, each yielding `columns`."""
    walks = " UNION ALL ".join(f"({walk(type_condition(kind, kind_column))})" for kind in GRAPH_TYPES)
    return f"SELECT {columns} FROM ({walks}) AS nearest ORDER BY {distance} LIMIT {limit}"  # noqa: S608


def each_graph_queryset(walk: Callable[[str], QuerySet], *, distance: str, depth: int) -> QuerySet:
    """The ORM's form of each_graph_sql: `walk(kind)` is one type's walk (ordered by distance, sliced); their
    UNION ALL, the `depth` nearest by `distance`."""
    first, *others = (walk(kind) for kind in GRAPH_TYPES)
    return first.union(*others, all=True).order_by(distance)[:depth]
