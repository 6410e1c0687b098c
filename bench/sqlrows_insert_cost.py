"""The Python CPU of sending a write that carries inserted rows (eigenflux.base.sqlrows.update_carrying), with the
rows as VALUES lists and as one jsonb parameter per INSERT: building the statement and its parameters, and
psycopg's conversion of it (parsing the text for its placeholders, unless it keeps the parsed form, and dumping
every parameter), for the completion's shape (its update, two decisions, a call's row, the outcome event: 66
parameters as VALUES) and a checkpoint's (a few columns, a decision, a call's row: 26). Nothing is executed.

    .venv/bin/python bench/sqlrows_insert_cost.py [--repeat 2000]
"""

from __future__ import annotations

import argparse
import os
import sys
import timeit
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

import psycopg  # noqa: E402
from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402
from psycopg import adapt  # noqa: E402
from psycopg._queries import PostgresQuery  # noqa: E402

from eigenflux.base import sqlrows  # noqa: E402
from items.models import ModerationDecision, OutboxEvent, ProcessedItem  # noqa: E402
from pipeline.models import LLMCall  # noqa: E402

NOW = timezone.now()
DECISION = {"item_id": 5, "actor": "pipeline", "stage": "extraction", "verdict": "pass", "reason": "ok", "model": "m",
            "created_at": NOW, "run": 0}  # fmt: skip
CALL = {"prompt": "suggest_action", "model": "m", "item_id": 5, "latency_ms": 210.5, "input_tokens": 100,
        "output_tokens": 20, "outcome": "ok", "created_at": NOW}  # fmt: skip
EVENT = {"stream": "s", "event_id": str(uuid.uuid4()), "event_type": "item.completed", "subject": "5",
         "envelope": {"id": "x", "data": {"item_id": "5", "status": "completed"}}, "created_at": NOW}  # fmt: skip
COMPLETION = {"status": "completed", "summary": "s" * 100, "keywords": ["a", "b"], "domains": ["d"], "lang": "en",
              "quality": 0.7, "timeliness": "week", "geo": "", "source_type": "original", "expected_response": "",
              "expire_time": NOW, "suggestion": "x", "suggested_at": NOW, "group_id": 5, "processed_at": NOW,
              "claimed_by": "", "lease_expires_at": None, "broadcast_type": "supply", "analyzer": "m",
              "concepts": [1, 2], "extraction": {"a": 1}, "updated_at": NOW}  # fmt: skip
CHECKPOINT = {"safety_passed_at": NOW, "lease_expires_at": NOW, "updated_at": NOW}
WHERE = {"raw": 5, "status": "processing", "claimed_by": "t"}


def inserts(shape: str) -> list[sqlrows.Rows]:
    if shape == "checkpoint":
        return [sqlrows.Rows(ModerationDecision, [DECISION], ignore_conflicts=True, if_updated=True),
                sqlrows.Rows(LLMCall, [CALL])]  # fmt: skip
    return [sqlrows.Rows(ModerationDecision, [DECISION, {**DECISION, "stage": "quality"}], ignore_conflicts=True,
                         if_updated=True),
            sqlrows.Rows(LLMCall, [CALL]), sqlrows.Rows(OutboxEvent, [EVENT], if_updated=True)]  # fmt: skip


def statement(shape: str, as_json: bool) -> tuple[str, list]:
    """The statement update_carrying() would send, its rows in the form asked for."""
    values = COMPLETION if shape == "completion" else CHECKPOINT
    update, params = sqlrows._update_sql(ProcessedItem, values, WHERE, {})
    parts = [f"updated AS ({update} RETURNING 1)"]
    for n, rows in enumerate(inserts(shape)):
        sql, more = sqlrows._insert_sql(rows, as_json=as_json, casts=rows.if_updated)
        parts.append(f"insert_{n} AS ({sql})")
        params += more
    return f"WITH {', '.join(parts)} SELECT count(*) FROM updated", params  # noqa: S608


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args()
    connection.ensure_connection()
    sqlrows._with_vectors(connection.connection)
    cursor = psycopg.Cursor(connection.connection)
    print("| shape | rows sent as | parameters | chosen by _as_json | build µs | psycopg convert µs | total µs |")
    print("|---|---|---|---|---|---|---|")
    for shape in ("completion", "checkpoint"):
        fixed = len(
            sqlrows._update_sql(ProcessedItem, COMPLETION if shape == "completion" else CHECKPOINT, WHERE, {})[1]
        )
        chosen = sqlrows._as_json(fixed, inserts(shape))
        for as_json in (False, True):
            sql, params = statement(shape, as_json)

            def convert(sql=sql, params=params) -> None:
                PostgresQuery(adapt.Transformer(cursor)).convert(sql, params)

            build = min(
                timeit.repeat(
                    lambda shape=shape, as_json=as_json: statement(shape, as_json), number=args.repeat, repeat=5
                )
            )
            sent = min(timeit.repeat(convert, number=args.repeat, repeat=5))
            build, sent = build / args.repeat * 1e6, sent / args.repeat * 1e6
            form = "jsonb" if as_json else "VALUES"
            mark = "yes" if chosen == as_json else ""
            print(f"| {shape} | {form} | {len(params)} | {mark} | {build:.0f} | {sent:.0f} | {build + sent:.0f} |")


if __name__ == "__main__":
    main()
