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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [text for item in value for text in _texts(item)]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _texts(item)]
    return []


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Benchmarks open hundreds of connections at once: a short accept backlog would drop SYNs (1 s retries).
    request_queue_size = 1024


class FakeOpenAIServer:
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
        self._in_flight_changed = threading.Condition(self._lock)
        self.in_flight = 0  # POSTs received and not yet answered
        self.max_in_flight = 0
        self.gate: tuple[int, float] | None = None  # (n, timeout): hold replies until n requests are in flight
        self._httpd = _Server((host, port), self._handler_class())
        self._thread: threading.Thread | None = None

    # -- control ------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeOpenAIServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

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
            "\n".join(_texts(body.get("instructions")) + _texts(body.get("input")) + _texts(body.get("messages")))
        )
        if match and match.group(1) in TASKS:
            return match.group(1)
        if body.get("model") == self.safety_model:
            return "safety"
        return "unknown"

    def _next_reply(self, task: str, body: dict[str, Any]) -> Any:
        with self._lock:
            if self._matching.get(task):
                prompt = "\n".join(_texts(body))
                for text, replies in self._matching[task]:
                    if replies and text in prompt:
                        return replies.popleft()
            queue = self._scripts.get(task)
            if queue:
                return queue.popleft()
            return self._defaults.get(task)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                return

            def do_GET(self) -> None:
                """GET /v1/models (a reachability probe): answered (with `models_status`), or the outage's fault."""
                path = self.path.split("?", 1)[0]
                record = RecordedRequest(path, {k.lower(): v for k, v in self.headers.items()}, {}, "models")
                self._record = record
                with server._lock:
                    server.requests.append(record)
                outage = server.outage
                if outage is not None:
                    self._answer(path, {}, "models", outage, 0)
                elif path.endswith("/models") and server.models_status == 200 and server.models_html:
                    page = b"<!doctype html><html><body>Welcome to the gateway</body></html>"
                    self.send_response(200)
                    self.send_header("content-type", "text/html")
                    self.send_header("content-length", str(len(page)))
                    self.end_headers()
                    self.wfile.write(page)
                elif path.endswith("/models") and server.models_status == 200:
                    models = [server.safety_model, "fake-main", "fake-embedding"]
                    data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in models]
                    self._json(200, {"object": "list", "data": data})
                else:
                    status = server.models_status if path.endswith("/models") else 404
                    headers = {"allow": "POST"} if status == 405 else None
                    self._json(status, {"error": {"message": f"no GET {path} here", "type": "fake"}}, headers)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                path = self.path.split("?", 1)[0]
                task = server._task_of(path, body)
                record = RecordedRequest(path, {k.lower(): v for k, v in self.headers.items()}, body, task)
                self._record = record
                with server._lock:
                    server.requests.append(record)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    server._in_flight_changed.notify_all()
                    if server.gate is not None:
                        # Hold every reply until `n` requests are in flight at once (or the timeout): shows
                        # how many requests a client really keeps open concurrently, without timing asserts.
                        n, timeout = server.gate
                        server._in_flight_changed.wait_for(lambda: server.in_flight >= n, timeout)
                try:
                    self._reply(path, body, task)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _reply(self, path: str, body: dict[str, Any], task: str) -> None:
                outage = server.outage
                reply = outage if outage is not None else server._next_reply(task, body)
                delay, reasoning = server.latency, server.reasoning_tokens
                if isinstance(reply, Reply):
                    delay, reasoning, reply = delay + reply.delay, reply.reasoning_tokens, reply.body
                if delay:
                    time.sleep(delay)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up
                    self._answer(path, body, task, reply, reasoning)

            def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
                self._record.status = status
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

            def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
                self._send(status, json.dumps(obj).encode(), headers)

            def _answer(self, path: str, body: dict[str, Any], task: str, reply: Any, reasoning: int) -> None:
                if isinstance(reply, Fault):
                    if reply.kind == "stall":
                        time.sleep(reply.seconds)
                        reply = server._defaults.get(task)
                    elif reply.kind == "empty_body":
                        self._send(200, b"")
                        return
                    elif reply.kind == "disconnect":
                        self.close_connection = True
                        with contextlib.suppress(OSError):
                            self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    else:
                        headers = {"x-should-retry": "false"}
                        if reply.retry_after is not None:
                            headers["retry-after"] = str(reply.retry_after)
                        message = {"error": {"message": f"fake fault {reply.status}", "type": "fake", "code": None}}
                        self._json(reply.status, message, headers)
                        return
                if path.endswith("/embeddings"):
                    self._embeddings(body, reply)
                elif path.endswith("/responses"):
                    self._responses(body, reply, reasoning)
                elif path.endswith("/chat/completions"):
                    self._chat(body, reply, reasoning)
                else:
                    self._json(404, {"error": {"message": f"no route {path}", "type": "fake"}})

            @staticmethod
            def _text(reply: Any) -> str:
                if reply is None:
                    return ""
                return reply if isinstance(reply, str) else json.dumps(reply)

            @staticmethod
            def _capped(text: str, cap: Any) -> tuple[str, bool]:
                words = text.split(" ")
                if isinstance(cap, int) and len(text.split()) > cap:
                    return " ".join(words[:cap]), True
                return text, False

            def _responses(self, body: dict[str, Any], reply: Any, reasoning: int) -> None:
                text, cut = self._capped(self._text(reply), body.get("max_output_tokens"))
                input_tokens = sum(
                    len(part.split()) for part in _texts(body.get("input")) + _texts(body.get("instructions"))
                )
                output_tokens = len(text.split())
                self._json(
                    200,
                    {
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
                    },
                )

            def _chat(self, body: dict[str, Any], reply: Any, reasoning: int) -> None:
                cap = body.get("max_completion_tokens", body.get("max_tokens"))
                text, cut = self._capped(self._text(reply), cap)
                prompt_tokens = sum(len(part.split()) for part in _texts(body.get("messages")))
                completion_tokens = len(text.split()) + reasoning
                self._json(
                    200,
                    {
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
                    },
                )

            def _embeddings(self, body: dict[str, Any], reply: Any) -> None:
                inputs = body.get("input", [])
                inputs = [inputs] if isinstance(inputs, str) else list(inputs)
                dimensions = int(body.get("dimensions") or 384)
                if isinstance(reply, dict) and "vectors" in reply:  # scripted: {"vectors": [[...], ...]}
                    vectors = reply["vectors"]
                else:
                    with server._lock:
                        overrides = dict(server._embeddings)
                    vectors = [overrides.get(text) or hashed_embedding(text, dimensions) for text in inputs]
                as_base64 = body.get("encoding_format") == "base64"
                data = []
                for index, vector in enumerate(vectors):
                    encoded: Any = vector
                    if as_base64:
                        encoded = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
                    data.append({"object": "embedding", "index": index, "embedding": encoded})
                tokens = sum(len(str(text).split()) for text in inputs)
                self._json(
                    200,
                    {
                        "object": "list",
                        "data": data,
                        "model": body.get("model", ""),
                        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                    },
                )

        return Handler


if __name__ == "__main__":  # run standalone for benchmarks: python -m tests.fakes.openai_server
    with FakeOpenAIServer(port=8765) as fake:
        print(f"fake OpenAI server on {fake.url}", flush=True)
        threading.Event().wait()
