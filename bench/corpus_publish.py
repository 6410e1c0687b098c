"""Publishing a labelled corpus through the real agent API, for the quality benches (search, feed): each document
by its author's token, the item ids mapped back to the documents."""

from __future__ import annotations

from django.test import Client


def publish_wave(docs: list[dict], tokens: dict[str, str]) -> dict[int, str]:
    """POST each of `docs` ({"id", "author", "content"}) as its author (`tokens`: author -> bearer token); item id ->
    document id. A refused publish stops the bench with the API's answer."""
    published: dict[int, str] = {}
    for doc in docs:
        client = Client(HTTP_AUTHORIZATION=f"Bearer {tokens[doc['author']]}")
        response = client.post("/api/v1/items/publish", {"content": doc["content"]}, content_type="application/json")
        if response.status_code != 202:
            raise SystemExit(f"publish of {doc['id']} failed: {response.status_code} {response.content[:300]}")
        published[int(response.json()["item_id"])] = doc["id"]
    return published
