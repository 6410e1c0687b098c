"""An OpenAI-compatible fake server for tests and benchmarks: POST /v1/responses, /v1/chat/completions and
/v1/embeddings, in the shapes the real `openai` SDK parses, and GET /v1/models.

Requests are told apart by the `TASK: <name>` marker every prompt carries (embeddings are task "embed";
a request naming the safety model with no marker counts as "safety"; GET /v1/models is task "models").
Each task answers a valid default reply unless a test scripted replies for it: `server.script("safety",
reply, ...)` queues replies (consumed in order, then back to the default); with `matching="text"` they go only to
requests of that task whose prompt contains the text (one item's call, whatever the order). A reply is a dict
(sent as JSON text), a str (sent verbatim, e.g. prose-wrapped or truncated JSON) or a Fault. Every request is
recorded in `server.requests`, with the status it got. `server.outage = Fault...` answers every request with
that fault until it is set back to None. `server.models_status` makes GET /v1/models answer that status, as a
gateway that serves no such route does (404; 405 with `Allow: POST`; 501), or one whose listing is down (503).

Tokens are counted as whitespace-separated words. Like a real server, a reply longer than the request's
output-token cap (Responses `max_output_tokens`, Chat `max_completion_tokens` / `max_tokens`) is cut there
and marked incomplete (Responses `status: incomplete`, Chat `finish_reason: length`).

Plain HTTP on 127.0.0.1, so other processes (`manage.py run_pipeline`) can use it through its URL.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import math
import re
import socket
import struct
import threading
import time
import uuid
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

TASK_MARKER = re.compile(r"TASK:\s*([a-z_]+)")
TASKS = ("process_item", "safety", "suggest_action", "extract_keywords", "official_reply", "embed")

DEFAULT_REPLIES: dict[str, dict[str, Any]] = {
    "safety": {"safe": True, "flag": "none", "reason": "Nothing unsafe found."},
    "process_item": {
        "discard": False,
        "discard_reason": "",
        "summary": "Offers spare GPU hours this weekend.",
        "keywords": ["gpu", "compute", "rental"],
        "domains": ["compute"],
        "broadcast_type": "supply",
        "lang": "en",
        "quality": 0.7,
        "timeliness": "timely",
        "geo": "",
        "source_type": "original",
        "expected_response": "contact",
        "expire_time": "",
    },
    "suggest_action": {"suggestion": "Reply to the author with the hours you need."},
    "extract_keywords": {"keywords": ["gpu rental", "inference"], "country_codes": ["DE"]},
    "official_reply": {"message": "Welcome to EigenFlux!"},
}


@dataclass(frozen=True)
class Fault:
    """A scripted failure: an HTTP status (with optional Retry-After), a stall, or an empty body."""

    kind: str
    status: int = 200
    retry_after: float | None = None
    seconds: float = 0.0

    @classmethod
    def http(cls, status: int, retry_after: float | None = None) -> Fault:
        return cls("http", status=status, retry_after=retry_after)

    @classmethod
    def rate_limited(cls, retry_after: float | None = 0.01) -> Fault:
        return cls.http(429, retry_after)

    @classmethod
    def server_error(cls, status: int = 500) -> Fault:
        return cls.http(status)

    @classmethod
    def stall(cls, seconds: float) -> Fault:
        """Sleep longer than the client's timeout before answering (the client sees a timeout)."""
        return cls("stall", seconds=seconds)

    @classmethod
    def empty_body(cls) -> Fault:
        return cls("empty_body")

    @classmethod
    def disconnect(cls) -> Fault:
        """Close the connection without answering (the client sees a connection error)."""
        return cls("disconnect")


@dataclass(frozen=True)
class Reply:
    """A scripted reply with its own latency and token usage."""

    body: Any
    delay: float = 0.0
    reasoning_tokens: int = 0


def prose_wrapped(obj: dict[str, Any]) -> str:
    return f"Sure! Here is the result you asked for:\n```json\n{json.dumps(obj, indent=2)}\n```\nLet me know."


def truncated(obj: dict[str, Any]) -> str:
    text = json.dumps(obj)
    return text[: max(1, len(text) * 2 // 3)]


def multiple(*objs: dict[str, Any]) -> str:
    return "\n\nor alternatively\n\n".join(json.dumps(obj) for obj in objs)


def hashed_embedding(text: str, dimensions: int) -> list[float]:
    """Deterministic unit vector from a text's hash (same text, same vector; different texts, unrelated)."""
    values: list[float] = []
    counter = 0
    while len(values) < dimensions:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        values.extend((byte - 127.5) / 127.5 for byte in digest)
        counter += 1
    values = values[:dimensions]
    norm = math.sqrt(sum(value * value for value in values)) or 1.0
    return [value / norm for value in values]


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    json: dict[str, Any]
    task: str
    time: float = field(default_factory=time.time)
    status: int = 0  # the HTTP status answered (0: none, the connection was dropped)

    @property
    def model(self) -> str:
        return str(self.json.get("model", ""))

    @property
    def authorization(self) -> str:
        return self.headers.get("authorization", "")


def texts_in(value: Any) -> list[str]:
    """Every string inside a request body's value (nested lists and objects), in order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [text for item in value for text in texts_in(item)]
    if isinstance(value, dict):
        return [text for item in value.values() for text in texts_in(item)]
    return []


class FakeOpenAIServer:
    """Serves on one asyncio event loop (aiohttp's server, in a daemon thread): a request costs a few hundred
    microseconds of CPU and no thread, so thousands of requests a second fit on one core and a benchmark of the
    pipeline measures the pipeline, not this server (bench/fake_server_rate.py)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, safety_model: str = "fake-safety"):
        self.safety_model = safety_model
        self.latency = 0.0  # added to every reply
        self.outage: Fault | None = None  # while set, every request gets this fault (scripts are kept)
        self.reasoning_tokens = 0  # reported in every reply's usage unless a Reply says otherwise
        self.models_status = 200  # what GET /v1/models answers (200: the list)
        self.models_html = False  # True: a 200 that is a web page, not a model list (a gateway's default page)
        self.requests: list[RecordedRequest] = []
        self._scripts: dict[str, deque[Any]] = defaultdict(deque)
        self._matching: dict[str, list[tuple[str, deque[Any]]]] = defaultdict(list)
        self._defaults: dict[str, Any] = {task: dict(reply) for task, reply in DEFAULT_REPLIES.items()}
        self._embeddings: dict[str, list[float]] = {}
        self._lock = threading.Lock()
        self.in_flight = 0  # POSTs received and not yet answered
        self.max_in_flight = 0
        self.gate: tuple[int, float] | None = None  # (n, timeout): hold replies until n requests are in flight
        # Benchmarks open hundreds of connections at once: a short accept backlog would drop SYNs (1 s retries).
        self._socket = socket.create_server((host, port), backlog=1024)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    # -- control ------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeOpenAIServer:
        started = threading.Event()
        self._loop = asyncio.new_event_loop()

        def serve() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._serve())
            started.set()
            self._loop.run_forever()
            pending = asyncio.all_tasks(self._loop)  # handlers still sleeping (a stall, a latency) are dropped
            for task in pending:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.close()

        self._thread = threading.Thread(target=serve, name="fake-openai", daemon=True)
        self._thread.start()
        started.wait(10)
        return self

    async def _serve(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("GET", "/{path:.*}", self._get)
        app.router.add_route("POST", "/{path:.*}", self._post)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.1)
        await self._runner.setup()
        await web.SockSite(self._runner, self._socket, backlog=1024).start()

    def stop(self) -> None:
        loop, runner, thread = self._loop, self._runner, self._thread
        if loop is None or runner is None or thread is None:
            self._socket.close()
            return
        with contextlib.suppress(Exception):  # stopping is best effort: a test is tearing down
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        self._socket.close()
        self._loop, self._runner, self._thread = None, None, None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def script(self, task: str, *replies: Any, matching: str | None = None) -> None:
        if task not in TASKS:
            raise ValueError(f"unknown task {task!r}; one of {TASKS}")
        with self._lock:
            if matching is None:
                self._scripts[task].extend(replies)
            else:
                self._matching[task].append((matching, deque(replies)))

    def set_default(self, task: str, reply: Any) -> None:
        with self._lock:
            self._defaults[task] = reply

    def set_embedding(self, text: str, vector: list[float]) -> None:
        with self._lock:
            self._embeddings[text] = list(vector)

    def count(self, task: str | None = None) -> int:
        with self._lock:
            return sum(1 for request in self.requests if task is None or request.task == task)

    def answered(self, task: str | None = None) -> int:
        """Requests answered with a reply (HTTP 200): the calls a provider would bill."""
        with self._lock:
            return sum(1 for r in self.requests if (task is None or r.task == task) and r.status == 200)

    def requests_for(self, task: str) -> list[RecordedRequest]:
        with self._lock:
            return [request for request in self.requests if request.task == task]

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._scripts.clear()
            self._matching.clear()
            self._embeddings.clear()
            self.models_status, self.models_html = 200, False
            self._defaults = {task: dict(reply) for task, reply in DEFAULT_REPLIES.items()}
            self.latency = 0.0
            self.reasoning_tokens = 0
            self.outage = None
            self.gate = None
            self.max_in_flight = 0

    # -- serving ------------------------------------------------------------------------------------
    def _task_of(self, path: str, body: dict[str, Any]) -> str:
        if path.endswith("/embeddings"):
            return "embed"
        match = TASK_MARKER.search(
            "\n".join(texts_in(body.get("instructions")) + texts_in(body.get("input")) + texts_in(body.get("messages")))
        )
        if match and match.group(1) in TASKS:
            return match.group(1)
        if body.get("model") == self.safety_model:
            return "safety"
        return "unknown"

    def _next_reply(self, task: str, body: dict[str, Any]) -> Any:
        with self._lock:
            if self._matching.get(task):
                prompt = "\n".join(texts_in(body))
                for text, replies in self._matching[task]:
                    if replies and text in prompt:
                        return replies.popleft()
            queue = self._scripts.get(task)
            if queue:
                return queue.popleft()
            return self._defaults.get(task)

    async def _get(self, request: web.Request) -> web.StreamResponse:
        """GET /v1/models (a reachability probe): answered (with `models_status`), or the outage's fault."""
        path = request.path
        record = RecordedRequest(path, {k.lower(): v for k, v in request.headers.items()}, {}, "models")
        with self._lock:
            self.requests.append(record)
        outage = self.outage
        if outage is not None:
            return await self._answer(request, record, path, {}, "models", outage, 0)
        if path.endswith("/models") and self.models_status == 200 and self.models_html:
            page = b"<!doctype html><html><body>Welcome to the gateway</body></html>"
            return _send(record, 200, page, content_type="text/html")
        if path.endswith("/models") and self.models_status == 200:
            models = [self.safety_model, "fake-main", "fake-embedding"]
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in models]
            return _json(record, 200, {"object": "list", "data": data})
        status = self.models_status if path.endswith("/models") else 404
        headers = {"allow": "POST"} if status == 405 else None
        return _json(record, status, {"error": {"message": f"no GET {path} here", "type": "fake"}}, headers)

    async def _post(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        path = request.path
        task = self._task_of(path, body)
        record = RecordedRequest(path, {k.lower(): v for k, v in request.headers.items()}, body, task)
        with self._lock:
            self.requests.append(record)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.gate is not None:
                await self._held_at_gate(*self.gate)
            outage = self.outage
            reply = outage if outage is not None else self._next_reply(task, body)
            delay, reasoning = self.latency, self.reasoning_tokens
            if isinstance(reply, Reply):
                delay, reasoning, reply = delay + reply.delay, reply.reasoning_tokens, reply.body
            if delay:
                await asyncio.sleep(delay)
            return await self._answer(request, record, path, body, task, reply, reasoning)
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _held_at_gate(self, n: int, timeout: float) -> None:
        """Hold the reply until `n` requests are in flight at once (or the timeout): shows how many requests a
        client really keeps open concurrently, without timing asserts."""
        deadline = time.monotonic() + timeout
        while self.in_flight < n and time.monotonic() < deadline:
            await asyncio.sleep(0.005)

    async def _answer(
        self,
        request: web.Request,
        record: RecordedRequest,
        path: str,
        body: dict,
        task: str,
        reply: Any,
        reasoning: int,
    ) -> web.StreamResponse:
        if isinstance(reply, Fault):
            if reply.kind == "stall":
                await asyncio.sleep(reply.seconds)
                reply = self._defaults.get(task)
            elif reply.kind == "empty_body":
                return _send(record, 200, b"")
            elif reply.kind == "disconnect":
                if request.transport is not None:
                    request.transport.abort()  # no answer: the client sees the connection dropped
                return web.Response(status=200)  # never sent: the connection is gone
            else:
                headers = {"x-should-retry": "false"}
                if reply.retry_after is not None:
                    headers["retry-after"] = str(reply.retry_after)
                message = {"error": {"message": f"fake fault {reply.status}", "type": "fake", "code": None}}
                return _json(record, reply.status, message, headers)
        if path.endswith("/embeddings"):
            return _json(record, 200, self._embeddings_reply(body, reply))
        if path.endswith("/responses"):
            return _json(record, 200, _responses(body, reply, reasoning))
        if path.endswith("/chat/completions"):
            return _json(record, 200, _chat(body, reply, reasoning))
        return _json(record, 404, {"error": {"message": f"no route {path}", "type": "fake"}})

    def _embeddings_reply(self, body: dict[str, Any], reply: Any) -> dict[str, Any]:
        inputs = body.get("input", [])
        inputs = [inputs] if isinstance(inputs, str) else list(inputs)
        dimensions = int(body.get("dimensions") or 384)
        if isinstance(reply, dict) and "vectors" in reply:  # scripted: {"vectors": [[...], ...]}
            vectors = reply["vectors"]
        else:
            with self._lock:
                overrides = dict(self._embeddings)
            vectors = [overrides.get(text) or hashed_embedding(text, dimensions) for text in inputs]
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for index, vector in enumerate(vectors):
            encoded: Any = vector
            if as_base64:
                encoded = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        tokens = sum(len(str(text).split()) for text in inputs)
        return {
            "object": "list",
            "data": data,
            "model": body.get("model", ""),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }


def _send(
    record: RecordedRequest,
    status: int,
    payload: bytes,
    headers: dict[str, str] | None = None,
    content_type: str = "application/json",
) -> web.Response:
    record.status = status
    response = web.Response(status=status, body=payload, headers=headers)
    response.content_type = content_type
    return response


def _json(record: RecordedRequest, status: int, obj: Any, headers: dict[str, str] | None = None) -> web.Response:
    return _send(record, status, json.dumps(obj).encode(), headers)


def _text(reply: Any) -> str:
    if reply is None:
        return ""
    return reply if isinstance(reply, str) else json.dumps(reply)


def _capped(text: str, cap: Any) -> tuple[str, bool]:
    words = text.split(" ")
    if isinstance(cap, int) and len(text.split()) > cap:
        return " ".join(words[:cap]), True
    return text, False


def _responses(body: dict[str, Any], reply: Any, reasoning: int) -> dict[str, Any]:
    text, cut = _capped(_text(reply), body.get("max_output_tokens"))
    input_tokens = sum(len(part.split()) for part in texts_in(body.get("input")) + texts_in(body.get("instructions")))
    output_tokens = len(text.split())
    return {
        "id": f"resp_{uuid.uuid4().hex}",
        "object": "response",
        "created_at": time.time(),
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "model": body.get("model", ""),
        "output": [
            {
                "type": "message",
                "id": f"msg_{uuid.uuid4().hex}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens + reasoning,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": input_tokens + output_tokens + reasoning,
        },
    }


def _chat(body: dict[str, Any], reply: Any, reasoning: int) -> dict[str, Any]:
    cap = body.get("max_completion_tokens", body.get("max_tokens"))
    text, cut = _capped(_text(reply), cap)
    prompt_tokens = sum(len(part.split()) for part in texts_in(body.get("messages")))
    completion_tokens = len(text.split()) + reasoning
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [
            {
                "index": 0,
                "finish_reason": "length" if cut else "stop",
                "message": {"role": "assistant", "content": text},
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        },
    }


if __name__ == "__main__":  # run standalone for benchmarks: python -m tests.fakes.openai_server
    with FakeOpenAIServer(port=8765) as fake:
        print(f"fake OpenAI server on {fake.url}", flush=True)
        threading.Event().wait()
