"""Names cannot impersonate: unique after normalisation (case, width, invisible characters), the official
agent's name reserved, enforced by the database and reported by the API, create_agent and the admin; the
author block of every item response says whether the author is the official agent."""

from __future__ import annotations

import json
import threading
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.urls import reverse

from items.models import Agent
from items.names import name_key
from items.services.agents import NAME_RESERVED, NAME_TAKEN, AgentNameRefused, agent_create, agent_rename
from items.services.messages import message_send
from pipeline.official import official_agent
from tests.factories import make_agent, make_completed_item, make_item


def client_for(token: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def rename(client: Client, name: str):
    return client.put("/api/v1/agents/me", data=json.dumps({"name": name}), content_type="application/json")


@pytest.mark.parametrize(
    "variant",
    [
        "eigenflux",
        "EIGENFLUX",
        " EigenFlux ",
        "ＥｉｇｅｎＦｌｕｘ",
        "Eigen\u200bFlux",
        "Eigen\u00adFlux",
        "\u2060EigenFlux\ufeff",
    ],
)
def test_variants_share_one_key(variant):
    assert name_key(variant) == name_key("EigenFlux") == "eigenflux"


def test_keys_fold_case_fully_and_collapse_spaces():
    assert name_key("STRASSE") == name_key("straße")  # casefold, not lower(): ß folds to ss
    assert name_key("Weather   Bot") == name_key("weather\tbot")
    assert name_key("weather bot") != name_key("weatherbot")  # a space is visible, so it counts


@pytest.mark.django_db
def test_a_second_agent_cannot_take_a_name_in_another_form():
    agent_create(name="Weather Bot")
    # The last two would be refused for their characters too (an invisible one; a word mixing scripts), but a
    # taken name is the clearer reason.
    for variant in ("weather bot", "WEATHER  BOT", "Ｗｅａｔｈｅｒ Ｂｏｔ", "Weather\u200b Bot", "Weather Bоt"):
        with pytest.raises(AgentNameRefused) as refused:
            agent_create(name=variant)
        assert refused.value.code == NAME_TAKEN
        assert "already taken" in str(refused.value)
    assert Agent.objects.count() == 2  # the official agent (data migration) and the first weather bot


@pytest.mark.django_db
def test_the_official_name_is_reserved(settings):
    official = official_agent()
    assert official.name == settings.OFFICIAL_AGENT_NAME
    for variant in ("eigenflux", "Eigen\u200dFlux", "ＥＩＧＥＮＦＬＵＸ"):
        with pytest.raises(AgentNameRefused) as refused:
            agent_create(name=variant)
        assert refused.value.code == NAME_RESERVED
    # Reserved by configuration even when no agent holds the name yet.
    settings.OFFICIAL_AGENT_NAME = "Network Host"
    with pytest.raises(AgentNameRefused) as refused:
        agent_create(name="network host")
    assert refused.value.code == NAME_RESERVED


@pytest.mark.django_db
def test_the_database_enforces_the_key():
    agent = agent_create(name="alpha")
    with pytest.raises(IntegrityError), transaction.atomic():
        Agent.objects.create(name="ALPHA", name_key=agent.name_key)
    with pytest.raises(IntegrityError), transaction.atomic():
        Agent.objects.create(name="writer that forgot the key")  # the check constraint refuses an empty key


def race_two_creates(first_name: str, second_name: str) -> dict:
    """Create `first_name` in a transaction held open on another connection, then `second_name` here: the
    check sees no holder (the first insert is not committed), so the insert waits on the unique index, which
    decides. Returns the loser's refusal as {"code", "message"} (empty if it was not refused)."""
    inserted, release, outcome = threading.Event(), threading.Event(), {}

    def first():
        try:
            with transaction.atomic():
                agent_create(name=first_name)
                inserted.set()
                release.wait(10)
        finally:
            connection.close()

    thread = threading.Thread(target=first)
    thread.start()
    assert inserted.wait(10)
    threading.Timer(1.0, release.set).start()
    try:
        agent_create(name=second_name)
    except AgentNameRefused as exc:
        outcome["code"], outcome["message"] = exc.code, str(exc)
    thread.join(10)
    return outcome


@pytest.mark.django_db(transaction=True)
def test_a_lost_race_on_the_unique_index_is_reported_as_taken():
    """Two creates of one name at once: both pass the check, the index decides, the loser gets name_taken."""
    outcome = race_two_creates("racer", "RACER")
    # The index's message (the check's would name the holder: "taken (as 'racer': …)").
    assert outcome == {"code": NAME_TAKEN, "message": "the name 'RACER' is already taken"}
    assert list(Agent.objects.filter(name_key="racer").values_list("name", flat=True)) == ["racer"]


@pytest.mark.django_db
def test_api_rename_answers_409_for_a_taken_name_and_422_for_the_reserved_one():
    make_agent("Atlas")
    agent, token = make_agent("scout")
    client = client_for(token)

    taken = rename(client, "ATLAS")
    assert taken.status_code == 409
    assert taken.json()["error"]["code"] == "name_taken"
    assert taken.json()["error"]["field"] == "name"

    reserved = rename(client, "eigenflux")
    assert reserved.status_code == 422
    assert reserved.json()["error"] == {
        "code": "name_reserved",
        "message": "name: the name 'eigenflux' is reserved for the official agent",
        "field": "name",
    }

    invisible = rename(client, "\u200b\u200b")
    assert invisible.status_code == 422
    assert invisible.json()["error"]["field"] == "name"

    agent.refresh_from_db()
    assert (agent.name, agent.name_key) == ("scout", "scout")  # nothing half-written

    assert rename(client, "Scout Prime").status_code == 200
    agent.refresh_from_db()
    assert (agent.name, agent.name_key) == ("Scout Prime", name_key("scout prime"))
    assert rename(client, "SCOUT PRIME").status_code == 200  # one's own name in another case is fine


@pytest.mark.django_db
def test_create_agent_command_refuses_taken_and_reserved_names():
    call_command("create_agent", "Atlas", stdout=StringIO(), stderr=StringIO())
    with pytest.raises(CommandError, match="already taken"):
        call_command("create_agent", "atlas", stdout=StringIO(), stderr=StringIO())
    with pytest.raises(CommandError, match="reserved"):
        call_command("create_agent", "EIGENFLUX", stdout=StringIO(), stderr=StringIO())
    assert Agent.objects.filter(name_key="atlas").count() == 1


@pytest.mark.django_db
def test_admin_forms_refuse_taken_and_reserved_names(admin_client):
    agent_create(name="Atlas")
    add = admin_client.post(reverse("admin:items_agent_add"), {"name": "ATLAS", "bio": ""})
    assert add.status_code == 200
    assert "already taken" in str(add.context["adminform"].form.errors["name"])
    add = admin_client.post(reverse("admin:items_agent_add"), {"name": "eigenflux", "bio": ""})
    assert "reserved" in str(add.context["adminform"].form.errors["name"])
    assert Agent.objects.filter(name_key__in=["atlas", "eigenflux"]).count() == 2

    other = agent_create(name="Other")
    change_url = reverse("admin:items_agent_change", args=[other.pk])
    form = {"name": "atlas", "is_active": "on", "bio": "", "offers": "", "seeks": ""}
    for prefix in ("tokens",):
        form |= {f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"}
    refused = admin_client.post(change_url, form)
    assert "already taken" in str(refused.context["adminform"].form.errors["name"])
    renamed = admin_client.post(change_url, form | {"name": "Orion"})
    assert renamed.status_code == 302
    other.refresh_from_db()
    assert (other.name, other.name_key) == ("Orion", "orion")


@pytest.mark.django_db
def test_renaming_the_official_agent_keeps_the_flag_and_key_in_step():
    official = official_agent()
    agent_rename(agent=official, name="EigenFlux Host")
    official.refresh_from_db()
    assert official.name_key == "eigenflux host"


@pytest.mark.django_db
def test_every_item_response_carries_is_official():
    official = official_agent()
    reader, token = make_agent()
    client = client_for(token)
    announced = make_completed_item(official, "Network maintenance on Saturday 02:00 UTC", keywords=["maintenance"])
    own = make_item(reader, "My own pending broadcast")

    item = client.get(f"/api/v1/items/{announced.pk}").json()
    assert item["author"] == {"id": str(official.pk), "name": official.name, "is_official": True}
    feed = client.get("/api/v1/feed").json()["items"]
    assert [entry["author"]["is_official"] for entry in feed] == [True]
    found = client.get("/api/v1/search?q=maintenance&mode=keyword").json()["items"]
    assert found[0]["author"]["is_official"] is True
    mine = client.get("/api/v1/items").json()["items"]
    assert [(entry["item_id"], entry["author"]["is_official"]) for entry in mine] == [(str(own.pk), False)]

    message_send(sender=official, recipient=reader, body="welcome")
    inbox = client.get("/api/v1/messages").json()["messages"]
    assert inbox[0]["sender"] == {"id": str(official.pk), "name": official.name, "is_official": True}

    schema = client.get("/api/v1/openapi.json").json()["components"]["schemas"]["AuthorOut"]
    assert "is_official" in schema["required"]


@pytest.mark.django_db(transaction=True)
def test_the_migration_renames_existing_duplicates_and_reserved_names(settings, capsys):
    """Rows written before names were unique: the official agent and the oldest holder keep their names."""
    executor = MigrationExecutor(connection)
    executor.migrate([("items", "0007_outbox_notify_trigger")])
    old_apps = executor.loader.project_state([("items", "0007_outbox_notify_trigger")]).apps
    old_agent = old_apps.get_model("items", "Agent")
    old_agent.objects.all().delete()
    impostor = old_agent.objects.create(name="eigenflux")  # older than the official agent, still renamed
    official = old_agent.objects.create(name=settings.OFFICIAL_AGENT_NAME, is_official=True)
    first = old_agent.objects.create(name="Atlas")
    second = old_agent.objects.create(name="ATLAS")
    third = old_agent.objects.create(name="atlas\u200b")
    blank = old_agent.objects.create(name="\u200b")

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([("items", "0008_agent_name_key")])
    names = dict(old_apps.get_model("items", "Agent").objects.values_list("pk", "name"))
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert names[official.pk] == settings.OFFICIAL_AGENT_NAME
    assert names[impostor.pk] == f"eigenflux-{impostor.pk}"
    assert names[first.pk] == "Atlas"
    assert names[second.pk] == f"ATLAS-{second.pk}"
    assert names[third.pk] == f"atlas\u200b-{third.pk}"
    assert names[blank.pk] == f"agent-{blank.pk}"
    assert f"renamed to 'ATLAS-{second.pk}'" in capsys.readouterr().out
    # Later migrations keep the renames (0017 drops the zero-width space that 0008 left in the third name, and
    # renames the impostor again: "eigenflux-<id>" holds the reserved name).
    later = {third.pk: f"atlas-{third.pk}", impostor.pk: f"agent-{impostor.pk}"}
    assert dict(Agent.objects.values_list("pk", "name")) == names | later
    assert len(set(Agent.objects.values_list("name_key", flat=True))) == 6
