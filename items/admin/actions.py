"""What every admin action shares (docs/admin.md#actions): one service call per row with refusals counted,
the report to the moderator, the confirmation page that asks for a reason first, and the status badges.
The pipeline's admin uses them too (pipeline imports items, never the other way)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

Row = TypeVar("Row")

# The hidden field a detail page's action buttons post (the object's id), so the action, and its confirmation
# page, lead back to that page instead of the changelist.
BACK_TO_OBJECT = "_back_to_object"


def badge(value: str, label: str, tone: str) -> SafeString:
    return format_html('<span class="ef-badge ef-{}" data-value="{}">{}</span>', tone, value, label)


def report(modeladmin: admin.ModelAdmin, request: HttpRequest, verb: str, done: int, refusals: list[str]) -> None:
    """One success line with the count, one warning line listing each refusal and its reason."""
    noun = modeladmin.model._meta.verbose_name if done == 1 else modeladmin.model._meta.verbose_name_plural
    modeladmin.message_user(request, f"{verb} {done} {noun}.", messages.SUCCESS if done else messages.INFO)
    if refusals:
        modeladmin.message_user(
            request,
            f"{len(refusals)} refused: " + "; ".join(refusals[:20]) + (" …" if len(refusals) > 20 else ""),
            messages.WARNING,
        )


class ActionRefusedNever(Exception):
    """The default `refused` of apply_each: a service that refuses only by returning False."""


def apply_each(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    rows: Iterable[Row],
    service: Callable[[Row], Any],
    *,
    verb: str,
    refused: type[Exception] = ActionRefusedNever,
    unchanged: Callable[[Row], str] | None = None,
) -> None:
    """Call `service` once per row; a row it refuses (raises `refused`, or returns False when `unchanged` says
    why: "already inactive") is reported with the reason, the others are counted."""
    done, refusals = 0, []
    for row in rows:
        try:
            result = service(row)
        except refused as exc:
            refusals.append(str(exc))
            continue
        if result is False and unchanged is not None:
            refusals.append(unchanged(row))
            continue
        done += 1
    report(modeladmin, request, verb, done, refusals)


def confirm_with_form(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    queryset: QuerySet,
    *,
    form_class: type[forms.Form],
    action: str,
    title: str,
    confirm_label: str,
    explanation: str,
    describe: Callable[[Any], str],
    apply: Callable[[dict[str, Any]], None],
) -> TemplateResponse | None:
    """A destructive action asks first: the first request shows the selected rows and the form, the confirmed
    and valid one calls `apply(cleaned_data)` and returns to the changelist."""
    form = form_class(request.POST if "confirm" in request.POST else None)
    if form.is_bound and form.is_valid():
        apply(form.cleaned_data)
        return None
    return TemplateResponse(
        request,
        "admin/confirm_action.html",
        {
            **modeladmin.admin_site.each_context(request),
            "title": title,
            "opts": modeladmin.model._meta,
            "queryset": queryset,
            "objects": [describe(row) for row in queryset],
            "form": form,
            "action": action,
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
            "confirm_label": confirm_label,
            "explanation": explanation,
            "back_field": BACK_TO_OBJECT,
            "back_to": request.POST.get(BACK_TO_OBJECT, ""),
        },
    )


def back_to_object(modeladmin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse | None:
    """After an action posted from an object's page: back to that page (None: the changelist's own redirect)."""
    pk = request.POST.get(BACK_TO_OBJECT, "")
    if not pk.isdigit():
        return None
    opts = modeladmin.model._meta
    return redirect(reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[pk]))


def note_form(field: str, *, max_length: int, help_text: str) -> type[forms.Form]:
    """The form a confirming action asks for: one required text, e.g. a take-down's reason."""
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}), max_length=max_length, help_text=help_text
    )
    return type(f"{field.title()}Form", (forms.Form,), {field: text})


class EmptyFieldsHidden:
    """A ModelAdmin mixin for read-only pages: a field with nothing to say is left off the page, not shown as "-"
    (a section left empty goes too)."""

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)  # type: ignore[misc]
        if obj is None:
            return fieldsets
        shown = []
        for name, options in fieldsets:
            fields = [field for field in options["fields"] if not _is_empty(self._shown_value(obj, field))]
            if fields:
                shown.append((name, {**options, "fields": fields}))
        return shown

    def _shown_value(self, obj: Any, field: str) -> object:
        method = getattr(self, field, None)
        return method(obj) if callable(method) else getattr(obj, field, None)


def _is_empty(value: object) -> bool:
    return value is None or value == "" or value == [] or value == "-"
