"""The admin's two pages that are not model lists (docs/admin.md#health): the live pipeline health page and the
prompts page. They are mounted under the dead-letter and model-call admins (pipeline.admin), whose URLs and
permissions they keep: health for whoever may see dead letters, prompts for whoever may see model calls."""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.template.response import TemplateResponse

from pipeline import health_snapshot


def health_page(request: HttpRequest, *, modeladmin: admin.ModelAdmin) -> TemplateResponse:
    """Rendered once with a fresh snapshot; the page then follows the snapshots the WebSocket pushes."""
    if not health_snapshot.can_view_health(request.user):
        raise PermissionDenied
    snapshot = health_snapshot.health_snapshot()
    return TemplateResponse(
        request,
        "admin/pipeline/health.html",
        {
            **modeladmin.admin_site.each_context(request),
            "title": "Pipeline health",
            "opts": modeladmin.model._meta,
            "snapshot": snapshot,
            "snapshot_html": render_to_string("admin/pipeline/health_snapshot.html", {"snapshot": snapshot}),
            "push_seconds": health_snapshot.push_seconds(),
        },
    )


def prompts_page(request: HttpRequest, *, modeladmin: admin.ModelAdmin) -> TemplateResponse:
    """Every prompt with its schema, example output, start-up check and the last day's call figures."""
    if not modeladmin.has_view_permission(request):
        raise PermissionDenied
    return TemplateResponse(
        request,
        "admin/pipeline/prompts.html",
        {
            **modeladmin.admin_site.each_context(request),
            "title": "Prompts",
            "opts": modeladmin.model._meta,
            "prompts": health_snapshot.prompt_statuses(),
        },
    )
