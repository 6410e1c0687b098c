"""Look-alike names (security issue item 9): letters of other scripts, a capital I for an l, invisible characters
and combining marks make no second name that looks like the official agent's or another agent's, while names in
any script, accented or not, can still be held and stay distinct. Rules: items/names.py, docs/agent-names.md."""

from __future__ import annotations

import json

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.urls import reverse

from items.models import Agent
from items.names import caseless, looks_reserved, name_key, name_keys, name_shape_key
from items.services.agents import NAME_INVALID, NAME_RESERVED, NAME_TAKEN, AgentNameRefused, agent_create
from tests.factories import make_agent
from tests.items.test_agent_names import race_two_creates

LOOKALIKES_OF_THE_OFFICIAL_NAME = {
    "Cyrillic capital E": "\u0415igenFlux",
    "Ukrainian i": "E\u0456genFlux",
    "Greek capital epsilon": "\u0395igenFlux",
    "capital I for l": "EigenFIux",
    "capital I for l, all lower case": "eigenfIux",
    "digit one for l": "Eigenf1ux",
    "precomposed accent": "E\u00edgenFlux",
    "combining accent at the end": "EigenFlux\u0301",
    "combining accent inside": "Eigen\u0308Flux",
    "a space between the words": "Eigen Flux",
    # Issue 44, item 6: punctuation, separators, an article, a suffix, and Latin letters UTS #39 leaves apart.
    "a full stop after it": "EigenFlux.",
    "an exclamation mark after it": "EigenFlux!",
    "a hyphen between the words": "Eigen-Flux",
    "an underscore between the words": "Eigen_Flux",
    "an article before it": "The EigenFlux",
    "a suffix after it": "EigenFlux Team",
    "a prefix before it": "Official EigenFlux",
    "a Latin upsilon for u": "EigenFl\u028ax",
    "an x with a palatal hook": "EigenFlu\u1d8d",
}
LEGITIMATE = ["José", "Jose", "小明", "小朋", "さくら", "サクラ", "Zoë", "Zoe", "Nguyễn", "Müller", "Ζωή", "Иван"]
LEGITIMATE += ["محمد", "Ali", "All", "Иван Smith", "小明 Bot", "さくらAI", "김민준 Kim", "👩\u200d💻 Dev"]
LEGITIMATE += ["❤\ufe0f Fan", "Flux", "Eigen", "Fluxus Team"]
LEGITIMATE += ["نیک\u200cنام"]  # Persian, with the zero-width non-joiner its spelling needs
# Pairs UTS #39 calls confusable, and so one name here, whichever comes first.
ORDINARY_LOOKALIKES = [("Bill", "BiII"), ("Bill", "Bil1"), ("Orion", "0rion"), ("Sam", "Sarn")]


def rename(token: str, name: str):
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}").put(
        "/api/v1/agents/me", data=json.dumps({"name": name}), content_type="application/json"
    )


@pytest.mark.parametrize("name", LOOKALIKES_OF_THE_OFFICIAL_NAME.values(), ids=LOOKALIKES_OF_THE_OFFICIAL_NAME)
def test_every_lookalike_looks_like_the_official_name(name):
    assert looks_reserved(name_keys(name))


def test_a_capital_i_shares_the_key_as_written_and_all_capitals_the_key_as_read():
    official = name_keys("EigenFlux")
    assert name_keys("EigenFIux").shape == official.shape  # an I among small letters looks like an l
    assert name_keys("EIGENFLUX").read == official.read  # an I among capitals is the same name in another case
    ali, all_ = name_keys("Ali"), name_keys("All")  # yet a small i and a small l stay two letters
    assert ali.read != all_.read and ali.shape != all_.shape


@pytest.mark.django_db
@pytest.mark.parametrize("name", LOOKALIKES_OF_THE_OFFICIAL_NAME.values(), ids=LOOKALIKES_OF_THE_OFFICIAL_NAME)
def test_lookalikes_of_the_official_name_are_reserved(name):
    with pytest.raises(AgentNameRefused) as refused:
        agent_create(name=name)
    assert refused.value.code == NAME_RESERVED
    assert str(refused.value) == f"the name {name!r} looks like the reserved name 'EigenFlux'"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "character", ["\u2800", "\u3164", "\u115f", "\u1160", "\uffa0", "\u200b", "\u2060", "\ufeff", "\u00ad", "\u202e"]
)
def test_invisible_characters_are_refused_by_name(character):
    with pytest.raises(AgentNameRefused) as refused:
        agent_create(name=f"Nova{character}Bot")
    assert refused.value.code == NAME_INVALID
    assert f"name contains an invisible character U+{ord(character):04X} (" in str(refused.value)
    assert not Agent.objects.filter(name__startswith="Nova").exists()


@pytest.mark.django_db
def test_a_braille_blank_is_refused_as_invisible_and_in_the_official_name_as_reserved():
    with pytest.raises(AgentNameRefused) as refused:
        agent_create(name="No\u2800va")
    assert str(refused.value) == "name contains an invisible character U+2800 (BRAILLE PATTERN BLANK)"
    with pytest.raises(AgentNameRefused) as refused:
        agent_create(name="Eigen\u2800Flux")  # the reserved check comes first (agent_name_check's order)
    assert refused.value.code == NAME_RESERVED


@pytest.mark.django_db
def test_joiners_only_where_they_join_and_no_narrow_spaces():
    with pytest.raises(AgentNameRefused, match=r"invisible character U\+200D"):
        agent_create(name="Nova\u200dBot")  # between Latin letters a joiner only hides
    with pytest.raises(AgentNameRefused, match=r"narrow space U\+200A \(HAIR SPACE\)"):
        agent_create(name="Nova\u200aBot")
    agent_create(name="1\ufe0f\u20e3 Club")  # a keycap: a selector and an enclosing mark on a digit


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("\u0301", "contains a combining mark U+0301 (COMBINING ACUTE ACCENT) that is not on a letter"),
        ("\u0301\u0308", "contains a combining mark U+0301 (COMBINING ACUTE ACCENT) that is not on a letter"),
        ("\u0301Nova", "contains a combining mark U+0301 (COMBINING ACUTE ACCENT) that is not on a letter"),
        ("Nova \u0308Bot", "contains a combining mark U+0308 (COMBINING DIAERESIS) that is not on a letter"),
        ("Nova!\u0301", "contains a combining mark U+0301 (COMBINING ACUTE ACCENT) that is not on a letter"),
        ("No\u0301\u0301va", "puts the combining mark U+0301 (COMBINING ACUTE ACCENT) twice on one letter"),
        ("Nova\u0300\u0301\u0302\u0303\u0304", "stacks 5 combining marks on one letter; the limit is 4"),
    ],
)
def test_stray_and_stacked_combining_marks_are_refused(name, reason):
    with pytest.raises(AgentNameRefused) as refused:
        agent_create(name=name)
    assert refused.value.code == NAME_INVALID
    assert str(refused.value) == f"name {reason}"


@pytest.mark.django_db
def test_a_word_mixing_latin_with_cyrillic_is_refused():
    with pytest.raises(AgentNameRefused) as refused:
        agent_create(name="P\u0430ypal Support")
    assert refused.value.code == NAME_INVALID
    assert str(refused.value) == (
        "name mixes Cyrillic and Latin letters in the word 'P\u0430ypal', as look-alike names do"
    )
    agent_create(name="Nova")
    with pytest.raises(AgentNameRefused) as refused:
        agent_create(name="N\u043eva")  # a Cyrillic o: refused as taken, the clearer reason
    assert refused.value.code == NAME_TAKEN


@pytest.mark.django_db
def test_legitimate_names_in_any_script_are_accepted_and_distinct():
    agents = [agent_create(name=name) for name in LEGITIMATE]
    assert [agent.name for agent in agents] == LEGITIMATE
    assert len({agent.name_key for agent in agents}) == len({agent.name_shape_key for agent in agents}) == len(agents)
    for taken in ("JOSÉ", "ZOË", "ｊｏｓｅ", "NGUYỄN", "иван"):  # still one name in another case or width
        with pytest.raises(AgentNameRefused) as refused:
            agent_create(name=taken)
        assert refused.value.code == NAME_TAKEN


@pytest.mark.django_db
@pytest.mark.parametrize(("first", "second"), ORDINARY_LOOKALIKES + [(b, a) for a, b in ORDINARY_LOOKALIKES])
def test_two_agents_cannot_hold_lookalike_names_in_either_order(first, second):
    agent_create(name=first)
    with pytest.raises(AgentNameRefused) as refused:
        agent_create(name=second)
    assert refused.value.code == NAME_TAKEN
    assert str(refused.value) == (
        f"the name {second!r} is already taken (as {first!r}: names ignore case, width, invisible characters"
        " and look-alike letters)"
    )


@pytest.mark.django_db
def test_the_database_enforces_the_key_as_written():
    bill = agent_create(name="Bill")
    with pytest.raises(IntegrityError, match="agent_name_shape_key_unique"), transaction.atomic():
        Agent.objects.create(name="BiII", name_key="biii", name_shape_key=bill.name_shape_key)
    with pytest.raises(IntegrityError, match="agent_name_shape_key_set"), transaction.atomic():
        Agent.objects.create(name="writer that forgot the shape", name_key="writer that forgot the shape")


@pytest.mark.django_db(transaction=True)
def test_a_lost_race_on_the_key_as_written_is_reported_as_taken():
    """The names "Bill" and "BiII" read differently but look alike: only the name_shape_key index refuses one."""
    outcome = race_two_creates("Bill", "BiII")
    assert outcome == {"code": NAME_TAKEN, "message": "the name 'BiII' is already taken"}
    assert list(Agent.objects.filter(name__in=["Bill", "BiII"]).values_list("name", flat=True)) == ["Bill"]


@pytest.mark.django_db
def test_the_api_refuses_lookalikes_with_the_reason():
    make_agent("Bill")
    agent, token = make_agent("scout")

    taken = rename(token, "BiII")
    assert taken.status_code == 409
    assert taken.json()["error"]["code"] == "name_taken"

    reserved = rename(token, "\u0415igenFlux")
    assert reserved.status_code == 422
    assert reserved.json()["error"] == {
        "code": "name_reserved",
        "message": "name: the name '\u0415igenFlux' looks like the reserved name 'EigenFlux'",
        "field": "name",
    }

    invisible = rename(token, "No\u2800va")
    assert invisible.status_code == 422
    assert invisible.json()["error"] == {
        "code": "invalid",
        "message": "name: name contains an invisible character U+2800 (BRAILLE PATTERN BLANK)",
        "field": "name",
    }
    agent.refresh_from_db()
    assert agent.name == "scout"
    assert rename(token, "Zoë").status_code == 200


@pytest.mark.django_db
def test_the_admin_refuses_lookalikes(admin_client):
    agent_create(name="Bill")
    add = admin_client.post(reverse("admin:items_agent_add"), {"name": "Bil1", "bio": ""})
    assert "already taken (as &#x27;Bill&#x27;" in str(add.context["adminform"].form.errors["name"])
    add = admin_client.post(reverse("admin:items_agent_add"), {"name": "EigenFIux", "bio": ""})
    assert "looks like the reserved name" in str(add.context["adminform"].form.errors["name"])

    other = agent_create(name="Other")
    form = {"name": "B\u0456ll", "is_active": "on", "bio": "", "offers": "", "seeks": ""}
    form |= {"tokens-TOTAL_FORMS": "0", "tokens-INITIAL_FORMS": "0"}
    refused = admin_client.post(reverse("admin:items_agent_change", args=[other.pk]), form)
    assert "already taken" in str(refused.context["adminform"].form.errors["name"])
    assert list(Agent.objects.filter(pk=other.pk).values_list("name", flat=True)) == ["Other"]


@pytest.mark.django_db(transaction=True)
def test_the_migration_recomputes_keys_and_renames_lookalikes(settings, capsys):
    """Rows written under the caseless key alone: the official agent, then the oldest of each look-alike group,
    keep their names; every change is printed with its reason; reversing restores the caseless keys."""
    before, after = [("items", "0016_gin_indexes_without_pending_list")], [("items", "0017_agent_name_lookalikes")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old_agent = executor.loader.project_state(before).apps.get_model("items", "Agent")
    old_agent.objects.all().delete()

    def old(name, **fields):
        return old_agent.objects.create(name=name, name_key=caseless(name), **fields).pk

    impostor = old("\u0415igenFlux")  # older than the official agent, still renamed
    official = old(settings.OFFICIAL_AGENT_NAME, is_official=True)
    bill, bii, bil1, blank = old("Bill"), old("BiII"), old("Bil1"), old("Eigen\u2800Flux")
    hidden, sam, sarn, zoe, zoe_plain = old("Nova\u200bBot"), old("Sam"), old("Sarn"), old("Zoë"), old("Zoe")

    MigrationExecutor(connection).migrate(after)
    names = dict(Agent.objects.values_list("pk", "name"))
    assert names == {
        impostor: f"agent-{impostor}",
        official: settings.OFFICIAL_AGENT_NAME,
        bill: "Bill",
        bii: f"BiII-{bii}",
        bil1: f"Bil1-{bil1}",
        blank: f"agent-{blank}",
        hidden: "NovaBot",
        sam: "Sam",
        sarn: f"Sarn-{sarn}",
        zoe: "Zoë",
        zoe_plain: "Zoe",
    }
    for agent in Agent.objects.all():
        assert (agent.name_key, agent.name_shape_key) == (name_key(agent.name), name_shape_key(agent.name))
    report = capsys.readouterr().out
    assert f"agent #{impostor}: name '\u0415igenFlux' looks like the reserved name 'EigenFlux'" in report
    assert f"agent #{bii}: name 'BiII' reads or looks like the older agent #{bill} ('Bill'); renamed to" in report
    assert f"agent #{hidden}: name 'Nova\\u200bBot' held invisible characters; renamed to 'NovaBot'" in report
    assert report.count("renamed to") == 6

    MigrationExecutor(connection).migrate(before)
    restored = executor.loader.project_state(before).apps.get_model("items", "Agent")
    assert all(agent.name_key == caseless(agent.name) for agent in restored.objects.all())
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
