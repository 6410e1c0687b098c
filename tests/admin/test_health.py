"""The pipeline health snapshot (real Redis streams and groups, real rows), its admin page, the prompts
page, and the WebSocket that pushes fresh snapshots to allowed staff users only."""

from __future__ import annotations

import json
import re

import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from django.conf import settings as django_settings
from django.contrib.auth.models import Permission, User
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from items.events import ITEM_PUBLISHED, STREAM_ITEM_PUBLISH, build_envelope
from items.models import ItemStatus, ProcessedItem
from pipeline.health_snapshot import health_snapshot, human_duration, prompt_statuses
from pipeline.models import DeadLetter, LLMCall
from pipeline.runtime import liveness
from pipeline.runtime.dead_lettering import ARCHIVE_GROUP
from pipeline.streams import dlq_stream
from tests.factories import make_item

pytestmark = pytest.mark.django_db


def stream_with_work(client, *, entries: int, delivered: int, group="cg:item:publish"):
    client.xgroup_create(STREAM_ITEM_PUBLISH, group, id="0", mkstream=True)
    for i in range(entries):
        client.xadd(STREAM_ITEM_PUBLISH, build_envelope(event_type=ITEM_PUBLISHED, subject=str(i), data={}))
    if delivered:
        client.xreadgroup(group, "worker-a", {STREAM_ITEM_PUBLISH: ">"}, count=delivered)


def test_snapshot_reports_streams_groups_consumers(redis_client):
    stream_with_work(redis_client, entries=5, delivered=2)

    snapshot = health_snapshot(redis_client)

    publish = next(s for s in snapshot["streams"] if s["stream"] == STREAM_ITEM_PUBLISH)
    assert publish["length"] == 5
    [group] = publish["groups"]
    assert (group["name"], group["pending"], group["lag"]) == ("cg:item:publish", 2, 3)
    [consumer] = group["consumers"]
    assert consumer["name"] == "worker-a" and consumer["pending"] == 2 and consumer["idle_ms"] >= 0
    missing = next(s for s in snapshot["streams"] if s["stream"] == "stream:item:stats")
    assert (missing["length"], missing["exists"], missing["groups"]) == (0, False, [])
    json.dumps(snapshot)  # pushed over the socket as is


def test_snapshot_reports_outbox_dead_letters_throughput_and_model_latency(redis_client):
    make_item()
    make_item()  # two undispatched publish events
    done = make_item()
    ProcessedItem.objects.filter(pk=done.pk).update(status=ItemStatus.COMPLETED, processed_at=timezone.now())
    held = make_item()  # held for review at persist: finished by the pipeline too
    ProcessedItem.objects.filter(pk=held.pk).update(status=ItemStatus.REVIEW, processed_at=timezone.now())
    DeadLetter.objects.create(
        stream="stream:item:publish",
        group="cg:item:publish",
        message_id="1-0",
        error_class="transient",
        failed_at=timezone.now(),
    )
    DeadLetter.objects.create(
        stream="stream:item:publish",
        group="cg:item:publish",
        message_id="2-0",
        error_class="transient",
        failed_at=timezone.now(),
        state="resolved",
    )
    for latency in (100, 200, 300, 400):
        LLMCall.objects.create(prompt="safety", model="m", latency_ms=latency, input_tokens=10, outcome="ok")
    LLMCall.objects.create(prompt="safety", model="m", latency_ms=5000, outcome="unavailable")

    snapshot = health_snapshot(redis_client)

    assert snapshot["outbox"]["backlog"] == 4
    assert snapshot["outbox"]["oldest_age_seconds"] >= 0
    assert snapshot["dead_letters"]["open"] == 1
    assert snapshot["throughput"]["processed"] == 2 and snapshot["throughput"]["published"] == 4
    assert snapshot["throughput"]["points"][-1]["completed"] == 1
    assert snapshot["throughput"]["points"][-1]["review"] == 1
    [latency] = snapshot["model_latency"]
    assert (latency["prompt"], latency["calls"], latency["errors"]) == ("safety", 5, 1)
    assert latency["avg_ms"] == 1200.0 and latency["p95_ms"] > 400
    assert latency["input_tokens"] == 40


def test_health_page_renders_the_snapshot_and_opens_the_socket(mod_client, redis_client):
    stream_with_work(redis_client, entries=3, delivered=1)

    html = mod_client.get(reverse("admin:pipeline_health")).content.decode()

    assert "Pipeline health" in html
    assert "cg:item:publish" in html and "worker-a" in html
    assert "/ws/admin/health" in html


def test_health_page_shows_each_consumer_process_and_a_loop_that_is_not_alive(mod_client, redis_client):
    def status(name: str, *, reader_alive: bool, keeper_idle: float = 0.5) -> dict:
        loops = [
            {"name": "reader", "alive": reader_alive, "idle_seconds": 0.1, "errors": 0, "watched": True},
            {"name": "keeper", "alive": True, "idle_seconds": keeper_idle, "errors": 2, "watched": True},
            {"name": "worker-0", "alive": True, "idle_seconds": 900, "errors": 0, "watched": False},
        ]
        return {
            "consumer": name,
            "stream": STREAM_ITEM_PUBLISH,
            "group": "cg:item:publish",
            "host": "h",
            "pid": 7,
            "loops": loops,
            "stall_seconds": 30,
            "breakers": {"postgresql": "open", "model": "closed", "redis": "closed"},
            "held": 3,
        }

    liveness.publish(
        redis_client,
        [status("c-ok", reader_alive=True), status("c-dead", reader_alive=False, keeper_idle=120)],
    )

    snapshot = health_snapshot(redis_client)
    by_name = {c["consumer"]: c for c in snapshot["consumers"]}
    assert by_name["c-ok"]["healthy"] and by_name["c-ok"]["problems"] == []
    assert by_name["c-dead"]["problems"] == ["reader dead", "keeper stalled"]
    assert by_name["c-ok"]["open_breakers"] == {"postgresql": "open"}
    assert snapshot["unhealthy_consumers"] == 1
    html = mod_client.get(reverse("admin:pipeline_health")).content.decode()
    assert 'data-consumer="c-dead" data-healthy="no"' in html
    assert "reader dead" in html and "1 unhealthy" in html and "postgresql open" in html


def test_health_page_shows_a_breaker_open_past_its_bound_as_a_problem(mod_client, redis_client):
    def status(name: str, model_open: float) -> dict:
        loop = {"name": "reader", "alive": True, "idle_seconds": 0.1, "errors": 0, "watched": True}
        return {
            "consumer": name,
            "stream": STREAM_ITEM_PUBLISH,
            "group": "cg:item:publish",
            "loops": [loop],
            "stall_seconds": 30,
            "breakers": {"postgresql": "closed", "model": "half_open", "redis": "closed"},
            "breakers_open_seconds": {"model": model_open},
            "breaker_stuck_seconds": 300.0,
        }

    liveness.publish(redis_client, [status("c-paused", 12.0), status("c-stuck", 312.4)])

    by_name = {c["consumer"]: c for c in health_snapshot(redis_client)["consumers"]}
    assert by_name["c-paused"]["healthy"] and by_name["c-paused"]["problems"] == []  # a pause, not a problem
    assert by_name["c-stuck"]["problems"] == ["model breaker open 312s"]
    html = mod_client.get(reverse("admin:pipeline_health")).content.decode()
    assert 'data-consumer="c-stuck" data-healthy="no"' in html and "model breaker open 312s" in html
    # Either breaker open (a pause too) holds items up: the page says so above the tables, with the longest.
    assert 'id="health-model-degraded">Model degraded: the model endpoint is failing (calls paused for 312 s' in html


def test_prompts_page_lists_each_prompt_with_its_validation_status(mod_client):
    statuses = {p["name"]: p for p in prompt_statuses()}
    assert set(statuses) >= {"safety", "process_item"}
    assert all(p["schema"] for p in statuses.values())

    html = mod_client.get(reverse("admin:pipeline_prompts")).content.decode()
    for name, status in statuses.items():
        assert f'id="prompt-{name}"' in html
        assert ("valid" if status["valid"] else "error") in html


def test_prompts_page_shows_a_broken_prompt_as_invalid(mod_client, settings, tmp_path):
    for path in django_settings.PROMPTS_DIR.glob("*.txt"):
        (tmp_path / path.name).write_text(path.read_text())
    (tmp_path / "safety.txt").write_text("no separator, no example")
    settings.PROMPTS_DIR = tmp_path

    statuses = {p["name"]: p for p in prompt_statuses()}

    assert not statuses["safety"]["valid"] and statuses["safety"]["errors"]
    assert statuses["process_item"]["valid"]


# --- the WebSocket -----------------------------------------------------------------------------------------


def session_headers(user: User) -> list[tuple[bytes, bytes]]:
    client = Client()
    client.force_login(user)
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME].value
    return [
        (b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={cookie}".encode()),
        (b"host", b"testserver"),
        (b"origin", b"http://testserver"),
    ]


async def _talk(headers, *, between=None, messages=2, scheme="ws"):
    """Speak ASGI WebSocket to the project's whole application (eigenflux.asgi) with asgiref's communicator."""
    from eigenflux.asgi import application

    scope = {
        "type": "websocket",
        "scheme": scheme,
        "path": "/ws/admin/health",
        "headers": headers,
        "query_string": b"",
        "subprotocols": [],
    }
    communicator = ApplicationCommunicator(application, scope)
    await communicator.send_input({"type": "websocket.connect"})
    answer = await communicator.receive_output(timeout=5)
    connected, code = answer["type"] == "websocket.accept", answer.get("code")
    received = []
    if connected:
        for i in range(messages):
            message = await communicator.receive_output(timeout=10)
            received.append(json.loads(message["text"]))
            if i == 0 and between is not None:
                await between()
    await communicator.send_input({"type": "websocket.disconnect", "code": 1000})
    await communicator.wait(timeout=5)
    return connected, code, received


@pytest.mark.django_db(transaction=True)
def test_socket_pushes_fresh_snapshots_to_a_moderator(settings):
    from channels.db import database_sync_to_async

    settings.ADMIN_HEALTH_PUSH_SECONDS = 0.2
    user = User.objects.create_user("mod-ws", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_deadletter"))

    @database_sync_to_async
    def new_dead_letter():
        with transaction.atomic():
            DeadLetter.objects.create(
                stream="stream:item:publish",
                group="cg:item:publish",
                message_id="9-0",
                error_class="permanent",
                failed_at=timezone.now(),
            )

    connected, _, received = async_to_sync(_talk)(session_headers(user), between=new_dead_letter)

    assert connected
    first, second = received
    assert first["type"] == second["type"] == "health.snapshot"
    assert first["snapshot"]["dead_letters"]["open"] == 0
    assert second["snapshot"]["dead_letters"]["open"] == 1  # the value changed with no reload
    assert 'id="card-dead-letters"' in second["html"]


@pytest.mark.django_db(transaction=True)
def test_socket_refuses_staff_without_permission_and_anonymous():
    staff = User.objects.create_user("staff-ws", is_staff=True)

    connected, code, _ = async_to_sync(_talk)(session_headers(staff))
    assert not connected and code == 4403

    connected, code, _ = async_to_sync(_talk)([(b"origin", b"http://testserver")])
    assert not connected


@pytest.mark.django_db(transaction=True)
def test_socket_refuses_a_foreign_origin():
    user = User.objects.create_user("mod-ws2", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_deadletter"))
    headers = [h for h in session_headers(user) if h[0] != b"origin"] + [(b"origin", b"http://evil.example")]

    connected, _, _ = async_to_sync(_talk)(headers)
    assert not connected


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("host", "origin", "scheme", "opens"),
    [
        ("testserver", "http://testserver", "ws", True),
        ("testserver:8000", "http://testserver:8000", "ws", True),
        ("testserver", "https://testserver", "wss", True),
        ("testserver", "http://testserver:9999", "ws", False),  # another port is another site
        ("testserver:8000", "http://testserver:9999", "ws", False),
        ("testserver:8000", "http://testserver", "ws", False),
        ("testserver", "https://testserver", "ws", False),  # another scheme too
        ("testserver", "http://testserver", "wss", False),
        ("localhost", "http://localhost:9999", "ws", False),  # the reported case
        ("evil.example", "http://evil.example", "ws", False),  # a host outside ALLOWED_HOSTS
        ("testserver", "null", "ws", False),
    ],
)
def test_socket_origin_must_match_scheme_host_and_port(host, origin, scheme, opens):
    """Issue 44, item 10: the Origin check compared host names only (`http://localhost:9999` was accepted)."""
    user = User.objects.create_user("mod-ws3", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_deadletter"))
    headers = [h for h in session_headers(user) if h[0] not in (b"origin", b"host")]
    headers += [(b"host", host.encode()), (b"origin", origin.encode())]

    connected, _, _ = async_to_sync(_talk)(headers, messages=1, scheme=scheme)
    assert connected is opens


@pytest.mark.django_db(transaction=True)
def test_socket_opens_from_a_csrf_trusted_origin_and_behind_a_tls_proxy(settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://admin.example.org"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    user = User.objects.create_user("mod-ws4", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_deadletter"))
    base = [h for h in session_headers(user) if h[0] not in (b"origin", b"host")] + [(b"host", b"testserver")]

    assert async_to_sync(_talk)([*base, (b"origin", b"https://admin.example.org")], messages=1)[0]
    assert not async_to_sync(_talk)([*base, (b"origin", b"https://admin.example.org:8443")], messages=1)[0]
    proxied = [*base, (b"x-forwarded-proto", b"https"), (b"origin", b"https://testserver")]
    assert async_to_sync(_talk)(proxied, messages=1)[0]
    assert not async_to_sync(_talk)([*base, (b"origin", b"https://testserver")], messages=1)[0]


@pytest.mark.parametrize(
    ("milliseconds", "shown"),
    [
        (0, "0 ms"),
        (850, "850 ms"),
        (3210, "3.2 s"),
        (42_400, "42 s"),
        (240_000, "4 min"),
        (9_000_000, "2.5 h"),
        (50_000_000, "14 h"),
        (3 * 86_400_000, "3 d"),
    ],
)
def test_durations_read_in_human_units(milliseconds, shown):
    assert human_duration(milliseconds) == shown


def test_health_page_shows_idle_times_in_human_units_and_the_time_to_the_second(mod_client, redis_client):
    stream_with_work(redis_client, entries=1, delivered=1)

    html = mod_client.get(reverse("admin:pipeline_health")).content.decode()

    assert re.search(r"worker-a</code> — 1 pending, idle \d+ ms", html)
    stamp = re.search(r'<time id="health-generated">([^<]*)</time>', html).group(1)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", stamp), stamp


def test_a_quiet_group_lists_the_live_consumer_waiting_on_it(mod_client, redis_client):
    """Redis lists a consumer in a group only once it was handed an entry: the dead-letter archive groups are
    quiet most of the time, and their live consumers are shown from what run_pipeline reports."""
    archive = dlq_stream(STREAM_ITEM_PUBLISH)
    redis_client.xgroup_create(archive, ARCHIVE_GROUP, id="0", mkstream=True)
    name = "dlq-archive-item-publish-h-1-abc"
    liveness.publish(redis_client, [{"consumer": name, "stream": archive, "group": ARCHIVE_GROUP, "loops": []}])

    snapshot = health_snapshot(redis_client)

    group = next(s for s in snapshot["streams"] if s["stream"] == archive)["groups"][0]
    assert (group["consumers"], group["waiting"]) == ([], [name])
    html = mod_client.get(reverse("admin:pipeline_health")).content.decode()
    assert f"<code>{name}</code> — alive, nothing handed to it yet" in html
