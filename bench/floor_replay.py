"""The floor's replay process (bench/pipeline_floor.py): the captured plan done for each item with raw psycopg
(async, binary vectors), aiohttp and redis-py's asyncio client; no Django, no SDK, no runtime.

Started by bench/pipeline_floor.run_floor; prints "ready", waits for a line on stdin (the bench has taken its
CPU readings and added the stream entries), then works until every item is done and prints {"done": N}."""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import pickle
import sys
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.pipeline_floor import (  # noqa: E402
    CAPTURE_MESSAGE_ID,
    FLOOR_APPLICATION_NAME,
    FLOOR_GROUP,
    UUID_RE,
    VECTOR_MARKER,
    Plan,
    Step,
)


def _json_default(value: Any) -> str:
    if isinstance(value, datetime | uuid.UUID):
        return value.isoformat() if isinstance(value, datetime) else str(value)
    raise TypeError(f"cannot send {type(value).__name__} in JSON")


def _dumps(obj: Any) -> str:
    """A JSON parameter as eigenflux.base.sqlrows sends it (a row's time as ISO text, with its microseconds)."""
    return json.dumps(obj, default=_json_default)


# The broadcast type of the captured item (the fake model's default extraction, tests/fakes/openai_server.py).
CAPTURED_TYPE = "supply"


class _Item:
    def __init__(
        self, plan: Plan, item_id: int, message_id: str, content: str, content_hash: str, shift, kind: str | None = None
    ) -> None:
        self.plan = plan
        self.map_str = {
            plan.token: f"{message_id}@floor",
            plan.content: content,
            plan.content_hash: content_hash,
            f"{CAPTURE_MESSAGE_ID}@%": f"{message_id}@%",
        }
        if kind is not None:  # this item's type instead of the captured one (wherever the plan has it)
            self.map_str[CAPTURED_TYPE] = kind
        self.item_id = item_id
        self.shift = shift
        self.vector: Any = None
        self.uuids: dict[str, str] = {}

    def value(self, value: Any) -> Any:
        if isinstance(value, bool):
            return value
        if isinstance(value, int):
            return self.item_id if value == self.plan.item_id else value
        if isinstance(value, str):
            if value in (VECTOR_MARKER, self.plan.vector_text) or (value.startswith("[") and len(value) > 200):
                return self.vector
            if value in self.map_str:
                return self.map_str[value]
            if UUID_RE.match(value):
                return self.uuids.setdefault(value, str(uuid.uuid4()))
            if str(self.plan.item_id) == value:
                return str(self.item_id)
            return (
                value.replace(self.plan.content, self.map_str[self.plan.content])
                if self.plan.content in value
                else value
            )
        if isinstance(value, datetime):
            return value + self.shift
        if isinstance(value, uuid.UUID):
            return uuid.UUID(self.uuids.setdefault(str(value), str(uuid.uuid4())))
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.value(v) for v in value)
        wrapped = getattr(value, "obj", None)
        if wrapped is not None:  # psycopg's Json / Jsonb wrapper (inserted rows: times and UUIDs in it too)
            return type(value)(self.value(wrapped), dumps=_dumps)
        return value

    def statement(self, sql: str, params: Any) -> tuple[str, Any]:
        """The statement for this item; a vector parameter is sent in binary (its placeholder becomes %b)."""
        if params is None:
            return sql, None
        if isinstance(params, dict):
            mapped = {k: self.value(v) for k, v in params.items()}
            for key, value in mapped.items():
                if value is self.vector and value is not None:
                    sql = sql.replace(f"%({key})s", f"%({key})b")
            return sql, mapped
        mapped_list = [self.value(v) for v in params]
        if any(v is self.vector for v in mapped_list) and self.vector is not None:
            parts = sql.split("%s")
            out = parts[0]
            for i, part in enumerate(parts[1:]):
                out += ("%b" if mapped_list[i] is self.vector else "%s") + part
            sql = out
        return sql, mapped_list


async def _replay_item(item: _Item, pool, post) -> None:
    import numpy as np

    for step in item.plan.steps:
        if step.kind == "http":
            data = await post(step, json.dumps(item.value(step.body)).encode())
            if step.path.endswith("/embeddings"):
                item.vector = np.frombuffer(base64.b64decode(data["data"][0]["embedding"]), dtype="<f4")
            continue
        async with pool.connection() as conn:
            if step.atomic:
                async with conn.transaction():
                    for sql, params in step.statements:
                        await conn.execute(*item.statement(sql, params))
            else:
                for sql, params in step.statements:
                    await conn.execute(*item.statement(sql, params))


def _aiohttp_post(session, base_url: str):
    """The floor's requests: aiohttp directly. Returns the sender and what closes it (the session is the caller's)."""

    async def post(step: Step, body: bytes) -> Any:
        url = base_url + step.path.removeprefix("/v1")
        async with session.post(url, data=body, headers=step.headers) as response:
            return json.loads(await response.read())

    async def close() -> None:
        return None

    return post, close


def _sdk_post(base_url: str):
    """`--sdk`: the same requests through the openai package with the pipeline's own sender
    (pipeline.llm.wire.post_json: `client.post` with a body built by us, no response model, the SDK's aiohttp
    transport), on this one loop: what handlers as coroutines would cost at best while the SDK stays the client.
    Returns the sender and what closes its clients."""
    import openai

    from pipeline.llm.wire import endpoint, post_json

    clients: dict[str, openai.AsyncOpenAI] = {}  # one per API key, as the pipeline's clients are per settings

    async def post(step: Step, body: bytes) -> Any:
        key = step.headers.get("authorization", "Bearer floor").removeprefix("Bearer ")
        client = clients.get(key)
        if client is None:
            http = openai.DefaultAioHttpClient(timeout=30.0)
            client = clients[key] = openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0, http_client=http)
        return await post_json(client, endpoint(client, step.path.removeprefix("/v1")), body)

    async def close() -> None:
        for client in clients.values():
            await client.close()

    return post, close


async def _open_pool(args):
    import psycopg
    from pgvector.psycopg import register_vector_async
    from psycopg_pool import AsyncConnectionPool

    async def configure(conn: psycopg.AsyncConnection) -> None:
        await register_vector_async(conn)

    pool = AsyncConnectionPool(
        args.database_url,
        min_size=args.pool,
        max_size=args.pool,
        kwargs={"autocommit": True, "application_name": FLOOR_APPLICATION_NAME},
        configure=configure,
        open=False,
    )
    await pool.open(wait=True)
    return pool


async def _run(args) -> dict[str, Any]:
    import aiohttp
    import redis.asyncio as aioredis

    with open(args.plan, "rb") as fh:
        fields, items = pickle.load(fh)  # noqa: S301 - the bench wrote this file
    plan = Plan(**{**fields, "steps": [Step(**step) for step in fields["steps"]]})
    shift = datetime.now().astimezone() - plan.captured_at

    pool = await _open_pool(args)
    client = aioredis.from_url(args.redis_url)
    queue: asyncio.Queue = asyncio.Queue()
    by_id = {item_id: (content, content_hash) for item_id, content, content_hash in items}
    done = 0
    finished = asyncio.Event()
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        post, close = _sdk_post(args.base_url) if args.sdk else _aiohttp_post(session, args.base_url)

        async def worker() -> None:
            nonlocal done
            while True:
                message_id, item_id = await queue.get()
                content, content_hash = by_id[item_id]
                await _replay_item(_Item(plan, item_id, message_id, content, content_hash, shift), pool, post)
                await client.xack(args.stream, FLOOR_GROUP, message_id)
                done += 1
                if done >= len(items):
                    finished.set()

        async def reader() -> None:
            while not finished.is_set():
                if queue.qsize() >= args.concurrency:
                    await asyncio.sleep(0.005)
                    continue
                reply = await client.xreadgroup(
                    FLOOR_GROUP, "floor", {args.stream: ">"}, count=args.concurrency, block=100
                )
                for _stream, entries in reply or []:
                    for message_id, fields in entries:
                        queue.put_nowait((message_id.decode(), int(json.loads(fields[b"data"])["item_id"])))

        print("ready", flush=True)
        sys.stdin.readline()  # the bench has taken its CPU readings and added the entries
        tasks = [asyncio.create_task(worker()) for _ in range(args.concurrency)] + [asyncio.create_task(reader())]
        waiter = asyncio.create_task(finished.wait())
        await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
        for task in [waiter, *tasks]:
            task.cancel()
        for task in tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        await close()
    print(json.dumps({"done": done}), flush=True)
    sys.stdin.readline()  # the bench has read the backends' CPU: they may go now
    await pool.close()
    await client.aclose()
    return {"done": done}


def worker_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--plan", required=True)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--stream", required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--pool", type=int, default=8)
    parser.add_argument("--sdk", action="store_true", help="send the requests through the openai package")
    args = parser.parse_args(argv)
    asyncio.run(_run(args))
    return 0


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
