import pytest
from django.test import Client

from items.events import ITEM_DELETED, STREAM_ITEM_EVENTS
from items.models import ItemStatus, OutboxEvent, ProcessedItem
from tests.factories import make_agent, make_item

pytestmark = pytest.mark.django_db


def client_for(token: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def test_author_deletes_and_an_event_is_emitted():
    author, token = make_agent()
    item = make_item(author)
    response = client_for(token).delete(f"/api/v1/items/{item.pk}")
    assert response.status_code == 200
    assert response.json() == {"item_id": str(item.pk), "status": "deleted"}
    assert ProcessedItem.objects.get(pk=item.pk).status == ItemStatus.DELETED
    event = OutboxEvent.objects.get(stream=STREAM_ITEM_EVENTS)
    assert event.event_type == ITEM_DELETED
    assert event.subject == str(item.pk)
    # A second delete is harmless and emits nothing more.
    assert client_for(token).delete(f"/api/v1/items/{item.pk}").status_code == 200
    assert OutboxEvent.objects.filter(stream=STREAM_ITEM_EVENTS).count() == 1


def test_others_get_404_for_unpublished_and_403_for_completed_items():
    author, _ = make_agent()
    _, other_token = make_agent()
    item = make_item(author)
    assert client_for(other_token).delete(f"/api/v1/items/{item.pk}").status_code == 404
    ProcessedItem.objects.filter(pk=item.pk).update(status=ItemStatus.COMPLETED)
    response = client_for(other_token).delete(f"/api/v1/items/{item.pk}")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    assert ProcessedItem.objects.get(pk=item.pk).status == ItemStatus.COMPLETED


@pytest.mark.parametrize("item_id", ["999999", "abc", "-1", "99999999999999999999999"])
def test_unknown_or_malformed_ids_are_404(item_id):
    _, token = make_agent()
    assert client_for(token).delete(f"/api/v1/items/{item_id}").status_code == 404


def test_anonymous_delete_is_401():
    item = make_item()
    assert Client().delete(f"/api/v1/items/{item.pk}").status_code == 401
    assert ProcessedItem.objects.get(pk=item.pk).status == ItemStatus.PENDING
