"""The review queue page (docs/admin.md#review-queue): the items held for a moderator, why and with which scores,
and the keyboard-driven approve / reject. The page only lists; its form posts the selection to the items
changelist's `approve_held_items` / `reject_held_items` actions, so permissions, CSRF and reporting are the
admin's own, and the actions come back here."""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from items.selectors import held_items

QUEUE_URL_NAME = "items_processeditem_review"
SCRIPT_URL_NAME = "items_processeditem_review_keys"
# The hidden field the queue's form posts, so an action sends the moderator back to the queue.
BACK_TO_QUEUE = "_review_queue"


def review_urls(modeladmin: admin.ModelAdmin) -> list[URLPattern]:
    site = modeladmin.admin_site
    return [
        path("review/", site.admin_view(lambda request: review_queue(request, modeladmin)), name=QUEUE_URL_NAME),
        # The keyboard script is a file of its own, not inline: the page needs no 'unsafe-inline' under a CSP.
        path("review/keys.js", site.admin_view(review_keys_script), name=SCRIPT_URL_NAME),
    ]


def review_queue(request: HttpRequest, modeladmin: admin.ModelAdmin) -> TemplateResponse:
    if not modeladmin.has_view_permission(request):
        raise PermissionDenied
    oldest_first = request.GET.get("order", "oldest") != "newest"
    items = list(held_items(oldest_first=oldest_first))
    return TemplateResponse(
        request,
        "admin/items/processeditem/review_queue.html",
        {
            **modeladmin.admin_site.each_context(request),
            "title": "Review queue",
            "opts": modeladmin.model._meta,
            "items": items,
            "oldest_first": oldest_first,
            "can_decide": modeladmin.has_change_permission(request),
            "back_field": BACK_TO_QUEUE,
        },
    )


def review_keys_script(request: HttpRequest) -> HttpResponse:
    """Static text; behind the admin login like the page that uses it."""
    body = render_to_string("admin/items/processeditem/review_keys.js")
    return HttpResponse(body, content_type="text/javascript; charset=utf-8")


def back_to_queue(request: HttpRequest) -> HttpResponse | None:
    """After a queue action: back to the queue (in its order) when the queue's form sent it, else None (the
    changelist's own redirect)."""
    if BACK_TO_QUEUE not in request.POST:
        return None
    order = "?order=newest" if request.POST.get(BACK_TO_QUEUE) == "newest" else ""
    return redirect(reverse(f"admin:{QUEUE_URL_NAME}") + order)
