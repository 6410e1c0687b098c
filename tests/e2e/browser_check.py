"""Real-browser check of the moderator admin (run by hand; pytest does not collect it).

Starts the project (embedded PostgreSQL + Redis in a fresh temporary data dir, uvicorn serving eigenflux.asgi),
seeds items, decisions, model calls and a dead letter, logs a moderator in, and drives headless Chromium over the
DevTools protocol: the items list, an item's page, the dead-letter list, the prompts page and the live health
page, saving screenshots into docs/screenshots/. On the health page it adds a dead letter while the page stays
open and checks the count changes with no reload (the WebSocket push).

    apt-get install chromium            # Debian's package; only this script needs it
    .venv/bin/python tests/e2e/browser_check.py [--out docs/screenshots] [--keep-data]
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http(url: str, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - our own local server
                return response.read().decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("Chromium not found: apt-get install chromium")


class DevTools:
    """A minimal Chrome DevTools Protocol client over the page's WebSocket."""

    def __init__(self, ws_url: str):
        from websockets.sync.client import connect

        self._stack = contextlib.ExitStack()
        self.ws = self._stack.enter_context(connect(ws_url, max_size=64 * 1024 * 1024, open_timeout=10))
        self.ids = itertools.count(1)

    def close(self) -> None:
        self._stack.close()

    def call(self, method: str, **params):
        call_id = next(self.ids)
        self.ws.send(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=60))
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + 30
        time.sleep(0.3)
        while self.evaluate("document.readyState") != "complete":
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not load")
            time.sleep(0.1)

    def wait_for(self, expression: str, timeout: float = 15.0):
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for: {expression}")
            time.sleep(0.2)

    def screenshot(self, path: Path) -> None:
        height = self.evaluate("Math.min(document.documentElement.scrollHeight, 4000)") or 1000
        self.call(
            "Emulation.setDeviceMetricsOverride", width=1600, height=int(height), deviceScaleFactor=1, mobile=False
        )
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        self.call("Emulation.clearDeviceMetricsOverride")
        print(f"  saved {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


def seed() -> dict:
    """Sample data through the product's own services and the runtime's dead-letter script."""
    from django.contrib.auth.models import Group, User
    from django.test import Client
    from django.utils import timezone

    from eigenflux.base.redis import get_redis
    from items.events import ITEM_PUBLISHED, STREAM_ITEM_PUBLISH, build_envelope
    from items.models import ItemStatus, ModerationDecision, ProcessedItem
    from items.services.agents import agent_create
    from items.services.blacklist import blacklist_keyword_create
    from items.services.publish import item_publish
    from pipeline.consumers.dead_letter_archive import dlq_archive_drain
    from pipeline.models import DeadLetter, LLMCall
    from pipeline.runtime.dead_lettering import dead_letter
    from tests.e2e.seeded_decisions import seeded_decisions

    author = agent_create(name="GPU broker")
    texts = [
        "Offering 40 spare A100 GPU hours this weekend for open-source model training.",
        "Looking for a Rust developer to review a small async networking crate.",
        "Alert: the public mirror of the dataset index is serving stale files since 09:00 UTC.",
        "FREE crypto giveaway!!! send 1 BTC get 2 back, click now",
        "Spare GPU hours this weekend, A100s, free for open-source training runs.",
        "Join our members-only trading signal group, first week free, returns shared daily.",
        "Short note: GPU prices moving.",
    ]
    items = [item_publish(author=author, content=text).item for text in texts]
    now = timezone.now()
    completed = {"status": ItemStatus.COMPLETED, "analyzer": "local", "processed_at": now, "quality": 0.8}
    ProcessedItem.objects.filter(pk=items[0].pk).update(
        **completed,
        broadcast_type="supply",
        summary="40 spare A100 GPU hours for OSS training this weekend",
        keywords=["gpu", "a100", "training"],
        domains=["ai", "compute"],
        group_id=items[0].pk,
    )
    ProcessedItem.objects.filter(pk=items[1].pk).update(
        **completed,
        broadcast_type="demand",
        summary="Seeking a Rust reviewer for an async networking crate",
        keywords=["rust", "review"],
        domains=["software"],
    )
    ProcessedItem.objects.filter(pk=items[2].pk).update(
        **completed, broadcast_type="alert", summary="Dataset index mirror serves stale files", domains=["data"]
    )
    ProcessedItem.objects.filter(pk=items[3].pk).update(
        status=ItemStatus.DISCARDED, reason="content_evaluation", processed_at=now
    )
    ProcessedItem.objects.filter(pk=items[4].pk).update(
        status=ItemStatus.DISCARDED,
        reason="content_evaluation",
        processed_at=now,
        analyzer="local",
        safety_risk=0.05,
        summary="Free A100 GPU hours for OSS training",
        quality=0.15,
        group_id=items[0].pk,
        broadcast_type="supply",
    )
    held = {"status": ItemStatus.REVIEW, "analyzer": "local", "processed_at": now, "broadcast_type": "info"}
    ProcessedItem.objects.filter(pk=items[5].pk).update(
        **held, summary="Members-only trading signal group", quality=0.6, safety_risk=0.48
    )
    ProcessedItem.objects.filter(pk=items[6].pk).update(
        **held, summary="GPU prices moving", quality=0.25, safety_risk=0.05
    )
    for item_index, stage, verdict, category, reason, model in seeded_decisions():
        ModerationDecision.objects.create(
            item_id=items[item_index].pk,
            actor="pipeline",
            stage=stage,
            verdict=verdict,
            category=category,
            reason=reason,
            model=model,
        )
    for item, prompt, latency in [
        (items[0], "safety", 412.5),
        (items[0], "process_item", 1830.2),
        (items[4], "safety", 380.0),
        (items[4], "process_item", 1622.9),
    ]:
        LLMCall.objects.create(
            prompt=prompt,
            model="local",
            item_id=item.pk,
            latency_ms=latency,
            input_tokens=420,
            output_tokens=96,
            outcome="ok",
        )
    blacklist_keyword_create(keyword="crypto giveaway")

    client = get_redis()
    client.xgroup_create(STREAM_ITEM_PUBLISH, "cg:item:publish", id="0", mkstream=True)
    envelope = build_envelope(
        event_type=ITEM_PUBLISHED,
        subject=str(items[1].pk),
        data={"item_id": str(items[1].pk), "author_id": str(author.pk)},
    )
    message_id = client.xadd(STREAM_ITEM_PUBLISH, envelope)
    client.xreadgroup("cg:item:publish", "browser-check-worker", {STREAM_ITEM_PUBLISH: ">"})
    dead_letter(
        client,
        stream=STREAM_ITEM_PUBLISH,
        group="cg:item:publish",
        consumer="browser-check-worker",
        message_id=message_id,
        fields=envelope,
        delivery_count=4,
        error_class="transient",
        error="RetryLater: safety model unavailable (HTTP 503)",
    )
    dlq_archive_drain(client)

    moderator = User.objects.create_user("moderator", password=None, is_staff=True)
    moderator.groups.add(Group.objects.get(name="moderators"))
    browser = Client()
    browser.force_login(moderator)
    letter = DeadLetter.objects.get().pk
    return {"session": browser.cookies["sessionid"].value, "item": items[4].pk, "held": items[5].pk, "letter": letter}


def add_dead_letter() -> None:
    from django.utils import timezone

    from pipeline.dead_letter_table import dead_letter_archive

    dead_letter_archive(
        stream="stream:item:events",
        group="cg:item:notify",
        message_id=f"{int(time.time())}-0",
        error_class="permanent",
        error="DeadLetterNow: unknown item",
        failed_at=timezone.now(),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--keep-data", action="store_true", help="keep the temporary data dir")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    chromium = find_chromium()

    data_dir = Path(tempfile.mkdtemp(prefix="eigenflux-browser-"))
    if not args.keep_data:
        # Registered first, so it runs last: after the embedded servers' own exit handlers stopped them.
        atexit.register(shutil.rmtree, data_dir, ignore_errors=True)
    env = {
        **os.environ,
        "EIGENFLUX_DATA_DIR": str(data_dir),
        "DJANGO_SETTINGS_MODULE": "eigenflux.settings",
        "ADMIN_HEALTH_PUSH_SECONDS": "1",
    }
    for name in ("DATABASE_URL", "REDIS_URL", "LLM_API_KEY", "OPENAI_API_KEY"):
        env.pop(name, None)
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    processes: list[subprocess.Popen] = []
    try:
        import django
        from django.core.management import call_command

        django.setup()
        print("migrating a fresh database and seeding sample data…")
        call_command("migrate", verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        seeded = seed()

        port = free_port()
        processes.append(
            subprocess.Popen(
                [
                    PYTHON,
                    "-m",
                    "uvicorn",
                    "eigenflux.asgi:application",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--log-level",
                    "warning",
                ],
                cwd=ROOT,
                env=env,
            )
        )
        base = f"http://127.0.0.1:{port}"
        wait_http(f"{base}/healthz")

        debug_port = free_port()
        processes.append(
            subprocess.Popen(
                [
                    chromium,
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--hide-scrollbars",
                    f"--remote-debugging-port={debug_port}",
                    f"--user-data-dir={data_dir / 'chromium'}",
                    "--window-size=1600,1000",
                    "about:blank",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        wait_http(f"http://127.0.0.1:{debug_port}/json/version")
        pages = [t for t in json.loads(wait_http(f"http://127.0.0.1:{debug_port}/json/list")) if t["type"] == "page"]
        tools = DevTools(pages[0]["webSocketDebuggerUrl"])
        tools.call("Page.enable")
        tools.call("Network.enable")
        tools.call("Network.setCookie", name="sessionid", value=seeded["session"], domain="127.0.0.1", path="/")

        from tests.e2e.review_queue_check import dead_letter_page, item_outcome, review_queue

        print("pages, logged in as a moderator:")
        tools.open(f"{base}/admin/items/processeditem/")
        assert tools.evaluate("document.querySelectorAll('#result_list tbody tr').length") == 7, "items list"
        tools.screenshot(args.out / "items-list.png")

        tools.open(f"{base}/admin/items/processeditem/{seeded['item']}/change/")
        assert tools.evaluate("!!document.getElementById('decision-history')"), "item page"
        # No empty blue bars: every section heading is one line high (a panel laid out beside the floated form
        # stretched its heading behind the fieldsets), and there is no submit row with a lone "Close".
        heights = tools.evaluate("[...document.querySelectorAll('#content h2')].map(h => h.offsetHeight)")
        assert heights and max(heights) < 60, f"item page: a heading is {max(heights)} px high"
        assert tools.evaluate("!document.querySelector('.submit-row')"), "item page: an empty submit row"
        no_dash = "![...document.querySelectorAll('.readonly')].some(f => f.textContent.trim() === '-')"
        assert tools.evaluate(no_dash), "item page: a field shown as '-'"
        tools.screenshot(args.out / "item-detail.png")
        item_outcome(tools, base, seeded["held"], args.out / "item-held.png")

        review_queue(tools, base, args.out / "review-queue.png")

        tools.open(f"{base}/admin/pipeline/deadletter/")
        assert tools.evaluate("document.querySelectorAll('#result_list tbody tr').length") == 1, "dead letters"
        tools.screenshot(args.out / "dead-letters.png")
        dead_letter_page(tools, base, seeded["letter"], args.out / "dead-letter-detail.png")

        tools.open(f"{base}/admin/pipeline/llmcall/prompts/")
        tools.screenshot(args.out / "prompts.png")

        tools.open(f"{base}/admin/pipeline/deadletter/health/")
        tools.wait_for("document.getElementById('health-state').textContent === 'live'")
        count = "document.querySelector('#card-dead-letters .value').textContent.trim()"
        before = tools.evaluate(count)
        tools.evaluate("window.__notReloaded = true")
        add_dead_letter()
        after = tools.wait_for(f"({count}) !== {json.dumps(before)} && {count}")
        assert tools.evaluate("window.__notReloaded === true"), "the page reloaded"
        print(f"  health page: open dead letters {before} -> {after} without a reload (WebSocket push)")
        tools.screenshot(args.out / "health.png")
        tools.close()
        print("browser check passed")
        return 0
    finally:
        for process in reversed(processes):
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
        if args.keep_data:
            print(f"data kept in {data_dir}")


if __name__ == "__main__":
    sys.exit(main())
