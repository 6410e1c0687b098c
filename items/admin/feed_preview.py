"""An agent's feed as the unseen feed would serve it now, each item's score broken down by signal ("why this
item", docs/feed.md): for support and for tuning. Read-only: nothing is recorded as served."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils import timezone

from items.feed_ranking import SIGNALS, rank_feed
from items.models import Agent
from items.ranker.serving import model_terms

PREVIEW_URL_NAME = "items_agent_feed"
PREVIEW_ITEMS = 30


def feed_preview_urls(modeladmin: admin.ModelAdmin) -> list[URLPattern]:
    view = modeladmin.admin_site.admin_view(lambda request, agent_id: feed_preview(request, modeladmin, agent_id))
    return [path("<int:agent_id>/feed/", view, name=PREVIEW_URL_NAME)]


def feed_preview(request: HttpRequest, modeladmin: admin.ModelAdmin, agent_id: int) -> TemplateResponse:
    if not modeladmin.has_view_permission(request):
        raise PermissionDenied
    agent = Agent.objects.filter(pk=agent_id).first()
    if agent is None:
        raise Http404("no such agent")
    unseen = request.GET.get("seen") != "all"
    seen_since = timezone.now() - timedelta(days=settings.FEED_SEEN_DAYS) if unseen else None
    ranked = rank_feed(reader=agent, page_size=10, depth=PREVIEW_ITEMS, seen_since=seen_since)
    rows = [
        {
            "entry": entry,
            "parts": [round(entry.parts.get(name, 0.0), 2) for name in SIGNALS],
            "model_terms": model_terms(entry.features, entry.ranker),
        }
        for entry in ranked
    ]
    return TemplateResponse(
        request,
        "admin/items/agent/feed_preview.html",
        {
            **modeladmin.admin_site.each_context(request),
            "title": f"Feed of {agent.name}, as served now",
            "opts": modeladmin.model._meta,
            "agent": agent,
            "signals": SIGNALS,
            "rows": rows,
            "unseen": unseen,
            "ranker": next((entry.ranker for entry in ranked if entry.ranker), ""),
        },
    )
