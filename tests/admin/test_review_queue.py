"""The review queue page (docs/admin.md#review-queue): it lists the held items with why and their scores, its
keyboard script is served and wired, and its approve / reject (one or in bulk) are the changelist's actions,
which need the change permission and bring the moderator back to the queue."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from items.events import ITEM_COMPLETED, ITEM_DISCARDED
from items.models import DecisionStage, ItemStatus, ModerationDecision, OutboxEvent, ProcessedItem
from tests.admin.conftest import messages_of
from tests.factories import make_completed_item, make_held_item

QUEUE = reverse("admin:items_processeditem_review")
SCRIPT = reverse("admin:items_processeditem_review_keys")
CHANGELIST = reverse("admin:items_processeditem_changelist")
SCRIPT_TEMPLATE = "admin/items/processeditem/review_keys.js"


def queue_post(client, action: str, *items, **extra):
    """What the queue's form sends (the keyboard's a / r press its buttons)."""
    data = {"action": action, "_selected_action": [str(i.pk) for i in items], "_review_queue": "oldest", **extra}
    return client.post(CHANGELIST, data)


def status(item) -> str:
    return ProcessedItem.objects.get(pk=item.pk).status


def test_the_queue_lists_held_items_with_why_and_their_scores(mod_client):
    older = make_held_item(content="A members-only trading group, first week free", safety_risk=0.42, quality=0.61)
    newer = make_held_item(content="Short note about GPUs", quality=0.24, held_category="borderline_quality")
    published = make_completed_item(content="Published broadcast, not held")

    page = mod_client.get(QUEUE)
    assert page.status_code == 200
    html = page.content.decode()
    assert [item.pk for item in page.context["items"]] == [older.pk, newer.pk]  # oldest first by default
    assert "safety_risk" in html and "0.42" in html and "0.61" in html
    assert "borderline_quality" in html and "0.24" in html
    assert "Published broadcast" not in html and str(published.pk) not in [str(i.pk) for i in page.context["items"]]
    assert [i.pk for i in mod_client.get(QUEUE + "?order=newest").context["items"]] == [newer.pk, older.pk]
    # The page's form posts to the actions, and the keyboard script is loaded from a file (no inline code).
    assert f'<script src="{SCRIPT}" defer></script>' in html
    assert 'id="review-form"' in html and 'value="approve_held_items"' in html and 'value="reject_held_items"' in html
    assert "onclick" not in html and "onkeydown" not in html
    assert reverse("admin:items_processeditem_review") in mod_client.get(reverse("admin:index")).content.decode()


def test_the_keyboard_script_is_served_and_wired_to_the_page(mod_client):
    script = mod_client.get(SCRIPT)
    assert script.status_code == 200 and script["Content-Type"].startswith("text/javascript")
    body = script.content.decode()
    make_held_item()
    page = mod_client.get(QUEUE).content.decode()
    for element_id in ("review-form", "review-reason", "review-approve", "review-reject", "review-select-all"):
        assert f'"{element_id}"' in body  # what the script looks up …
        assert f'id="{element_id}"' in page  # … is on the page
    assert 'class="ef-held"' in page and "tr.ef-held" in body
    for key in ('"j"', '"k"', '"x"', '"a"', '"r"', '"*"'):
        assert f"case {key}" in body
    assert "requestSubmit" in body and "eval(" not in body


def test_bulk_approve_from_the_queue_publishes_and_comes_back(mod_client, moderator):
    items = [make_held_item() for _ in range(3)]
    response = queue_post(mod_client, "approve_held_items", *items)
    assert response.status_code == 302 and response["Location"] == QUEUE
    assert [status(item) for item in items] == [ItemStatus.COMPLETED] * 3
    for item in items:
        decision = ModerationDecision.objects.get(item=item, stage=DecisionStage.REVIEW, verdict="approved")
        assert decision.moderator == moderator
        assert OutboxEvent.objects.filter(subject=str(item.pk), event_type=ITEM_COMPLETED).count() == 1
    assert messages_of(mod_client.get(QUEUE)) == ["Approved 3 processed items."]


def test_bulk_reject_with_a_reason_discards_and_without_one_asks_for_it(mod_client):
    first, second = make_held_item(), make_held_item()
    asked = mod_client.post(CHANGELIST, {"action": "reject_held_items", "_selected_action": [first.pk]})
    assert asked.status_code == 200 and b"Reject held items" in asked.content  # the confirmation page
    assert status(first) == ItemStatus.REVIEW

    response = queue_post(mod_client, "reject_held_items", first, second, confirm="1", reason="a scam")
    assert response.status_code == 302 and response["Location"] == QUEUE
    assert [status(first), status(second)] == [ItemStatus.DISCARDED] * 2
    assert list(
        ModerationDecision.objects.filter(stage=DecisionStage.REVIEW, verdict="rejected").values_list(
            "reason", flat=True
        )
    ) == ["a scam", "a scam"]
    assert OutboxEvent.objects.filter(event_type=ITEM_DISCARDED).count() == 2


def test_queue_actions_refuse_items_not_held_and_count_them(mod_client):
    held, published = make_held_item(), make_completed_item()
    queue_post(mod_client, "approve_held_items", held, published)
    lines = messages_of(mod_client.get(QUEUE))
    assert lines[0] == "Approved 1 processed item."
    assert "1 refused" in lines[1] and "it is completed" in lines[1]
    assert status(published) == ItemStatus.COMPLETED


def test_a_viewer_sees_the_queue_but_cannot_decide(staff, client):
    staff.user_permissions.add(Permission.objects.get(codename="view_processeditem"))
    client.force_login(staff)
    held = make_held_item()
    page = client.get(QUEUE)
    assert page.status_code == 200 and page.context["items"][0].pk == held.pk
    assert b"review-approve" not in page.content  # no buttons without the change permission
    queue_post(client, "approve_held_items", held)
    queue_post(client, "reject_held_items", held, confirm="1", reason="no")
    assert status(held) == ItemStatus.REVIEW


def test_staff_without_the_view_permission_get_403(staff_client):
    assert staff_client.get(QUEUE).status_code == 403


def test_the_item_page_offers_approve_and_reject_for_a_held_item(mod_client):
    held = make_held_item()
    page = mod_client.get(reverse("admin:items_processeditem_change", args=[held.pk])).content.decode()
    assert 'value="approve_held_items"' in page and 'value="reject_held_items"' in page


# A minimal DOM for the script under node: three rows, the buttons, the reason field; key presses are dispatched
# to the document's listener and the form records which button submitted it.
KEYS_HARNESS = r"""
const listeners = {};
function element(id, extra) {
  const own = {};
  return Object.assign({id: id, value: "", checked: false, tagName: "INPUT", type: "text",
    classList: {add() {}, remove() {}}, scrollIntoView() {}, focus() { focused = this; },
    blur() {}, addEventListener(type, fn) { own[type] = fn; }, fire(type, ev) { own[type](ev); },
    dispatchEvent(ev) { own[ev.type] && own[ev.type](ev); }}, extra || {});
}
let focused = null;
const submitted = [];
const rows = [1, 2, 3].map(n => {
  const box = element("box" + n, {type: "checkbox"});
  const link = {href: "/item/" + n};
  return element("row" + n, {box: box, querySelector(sel) { return sel.startsWith("input") ? box : link; }});
});
const ids = {
  "review-reason": element("review-reason"),
  "review-approve": element("review-approve", {tagName: "BUTTON"}),
  "review-reject": element("review-reject", {tagName: "BUTTON"}),
  "review-select-all": element("review-select-all", {type: "checkbox"}),
};
ids["review-form"] = element("review-form", {
  querySelectorAll() { return rows; }, requestSubmit(button) { submitted.push(button.id); }});
global.Event = function (type) { this.type = type; };
global.window = {location: ""};
global.document = {readyState: "complete", getElementById(id) { return ids[id] || null; },
  addEventListener(type, fn) { listeners[type] = fn; }};
function press(key, target) {
  listeners.keydown({key: key, target: target || {tagName: "BODY"}, preventDefault() {}});
}
require(process.argv[2]);
const checked = () => rows.map(r => r.box.checked);
press("j"); press("x"); press("a");                     // row 2 selected, approved
const afterApprove = {checked: checked(), submitted: submitted.slice()};
rows.forEach(r => { r.box.checked = false; });
press("*");                                             // all selected
const afterAll = checked();
press("r");                                             // no reason yet: asks for it
const asked = focused && focused.id;
ids["review-reason"].value = "spam";
ids["review-reason"].fire("keydown", {key: "Enter", preventDefault() {}});
console.log(JSON.stringify({afterApprove, afterAll, asked, submitted}));
"""


@pytest.mark.slow
def test_the_keyboard_script_moves_selects_and_submits(tmp_path):
    """The keys under node with a stand-in DOM: j moves, x selects, * selects all, a submits with the approve
    button, r asks for a reason and Enter in it submits with the reject button (never approve)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = tmp_path / "review_keys.js"
    script.write_text((Path(__file__).resolve().parents[2] / "templates" / SCRIPT_TEMPLATE).read_text())
    harness = tmp_path / "harness.js"
    harness.write_text(KEYS_HARNESS)
    result = subprocess.run([node, str(harness), str(script)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "afterApprove": {"checked": [False, True, False], "submitted": ["review-approve"]},
        "afterAll": [True, True, True],
        "asked": "review-reason",
        "submitted": ["review-approve", "review-reject"],
    }
