"""The benchmark's floor: a minimal Django view that inserts the same three rows as a publish, with the
ORM in one transaction, and nothing else (no auth, validation, idempotency or rate limit)."""

import json
import os
import uuid

from django.db import transaction
from django.http import JsonResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from eigenflux.urls import urlpatterns as product_urls
from items.models import OutboxEvent, ProcessedItem, RawItem


@csrf_exempt
def floor(request):
    body = json.loads(request.body)
    author_id = int(os.environ["BENCH_AGENT_ID"])
    with transaction.atomic():
        raw = RawItem.objects.create(author_id=author_id, content=body["content"], content_hash="x")
        ProcessedItem.objects.create(raw=raw, author_id=author_id)
        event_id = str(uuid.uuid4())
        OutboxEvent.objects.create(
            stream="bench:floor", event_id=event_id, event_type="bench", subject=str(raw.pk), envelope={"id": event_id}
        )
    return JsonResponse({"item_id": str(raw.pk)}, status=202)


urlpatterns = [path("bench/floor", floor), *product_urls]
