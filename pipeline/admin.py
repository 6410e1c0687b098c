"""The moderator's admin for the pipeline (docs/admin.md): dead letters with requeue and resolve, model calls and
their hourly roll-up. The health and prompts pages (pipeline.admin_views) are mounted under the dead-letter and
model-call admins."""

from __future__ import annotations

import contextlib
import json
from functools import partial

from django.contrib import admin
from django.db.models.functions import Substr
from django.template.loader import render_to_string
from django.urls import path, reverse
from django.utils import timezone
from django.utils.dateformat import format as date_format
from django.utils.html import format_html
from django.utils.text import Truncator

from items.admin import ITEM_DETAIL_PANELS
from items.admin.actions import (
    BACK_TO_OBJECT,
    EmptyFieldsHidden,
    apply_each,
    back_to_object,
    badge,
    confirm_with_form,
    note_form,
)
from items.models import ProcessedItem
from pipeline.admin_views import health_page, prompts_page
from pipeline.dead_letter_table import DeadLetterRefused, dead_letter_requeue, dead_letter_resolve
from pipeline.models import DeadLetter, DeadLetterState, ErrorClass, LLMCall, LLMCallHourly

STATE_TONES = {DeadLetterState.OPEN: "bad", DeadLetterState.REQUEUED: "processing", DeadLetterState.RESOLVED: "ok"}
ERROR_TONES = {ErrorClass.TRANSIENT: "warn", ErrorClass.PERMANENT: "bad"}
SUBJECT_CHARS = 24
ERROR_HEAD_CHARS = 80


ResolveForm = note_form("note", max_length=4000, help_text="What was done about it (kept on the letter).")


class MachineRecordsAdmin(admin.ModelAdmin):
    """Rows the pipeline writes for the record (model calls and their roll-up): browse only."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(DeadLetter)
class DeadLetterAdmin(EmptyFieldsHidden, admin.ModelAdmin):
    # Fits a 1400 px window beside the filters: what failed and how in one column, the start of the error cut
    # short (the whole error and the payload are on the letter's page).
    list_display = ("id", "origin", "failure", "state_badge", "attempts", "failed")
    list_filter = ("state", "error_class", "stream", "group")
    list_select_related = ("resolved_by",)
    search_fields = ("message_id", "event_id", "subject", "error")
    ordering = ("-failed_at",)
    show_full_result_count = False
    actions = ("requeue_letters", "resolve_letters")
    fieldsets = (
        ("Origin", {"fields": ("stream", "group", "message_id", "event_id", "event_type", "subject_link")}),
        ("Failure", {"fields": ("error_class_badge", "error_text", "delivery_count", "failed_at")}),
        ("Handling", {"fields": ("state_badge", "auto_requeues", "resolved_by", "note", "updated_at")}),
        ("Payload", {"fields": ("payload_pretty",)}),
    )
    change_list_template = "admin/pipeline/deadletter/change_list.html"
    change_form_template = "admin/pipeline/deadletter/change_form.html"

    def get_readonly_fields(self, request, obj=None):
        return [field for fieldset in self.fieldsets for field in fieldset[1]["fields"]]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("payload", "error").annotate(error_head=Substr("error", 1, 200))

    def has_add_permission(self, request):
        return False  # machine-made: the cg:dlq:archive consumer writes them

    def has_delete_permission(self, request, obj=None):
        return False  # resolve with a note instead: the record stays

    def save_model(self, request, obj, form, change):
        """Letters change only through requeue / resolve (conditional updates)."""

    def change_view(self, request, object_id, form_url="", extra_context=None):
        """The letter's page, with the list's requeue and resolve as buttons (the same actions: same permission,
        same confirmation, back to this page after)."""
        extra_context = {**(extra_context or {}), "show_save": False, "show_save_and_continue": False}
        letter = self.get_object(request, object_id)
        if letter is not None:
            closed = "" if letter.state == DeadLetterState.OPEN else f"Only an open letter; this one is {letter.state}"
            extra_context["letter_actions"] = [
                ("requeue_letters", "Requeue", closed),
                ("resolve_letters", "Resolve…", closed),
            ]
            extra_context["back_field"] = BACK_TO_OBJECT
        return super().change_view(request, object_id, form_url, extra_context)

    @admin.display(description="stream / group", ordering="stream")
    def origin(self, obj):
        return format_html("{}<br><small>{}</small>", obj.stream, obj.group)

    @admin.display(description="event type", ordering="event_type")
    def short_event_type(self, obj):
        return obj.event_type.removeprefix("io.eigenflux.") or "-"

    @admin.display(description="subject", ordering="subject")
    def subject_link(self, obj):
        if obj.subject.isdigit() and obj.stream.startswith("stream:item:"):
            url = reverse("admin:items_processeditem_change", args=[obj.subject])
            return format_html('<a href="{}">item {}</a>', url, obj.subject)
        return Truncator(obj.subject).chars(SUBJECT_CHARS) or "-"

    @admin.display(description="failure", ordering="error_class")
    def failure(self, obj):
        """The error class, the subject and event type, and the first line of the error, cut short."""
        head = (getattr(obj, "error_head", None) or "").strip().splitlines()
        return format_html(
            '{} {} <small>{}</small><br><small class="ef-error-head">{}</small>',
            self.error_class_badge(obj),
            self.subject_link(obj),
            self.short_event_type(obj),
            Truncator(head[0] if head else "-").chars(ERROR_HEAD_CHARS),
        )

    @admin.display(description="deliveries / requeues", ordering="delivery_count")
    def attempts(self, obj):
        return f"{obj.delivery_count} / {obj.auto_requeues}"

    @admin.display(description="failed at", ordering="failed_at")
    def failed(self, obj):
        return date_format(timezone.localtime(obj.failed_at), "Y-m-d H:i:s")

    @admin.display(description="error class", ordering="error_class")
    def error_class_badge(self, obj):
        return badge(obj.error_class, obj.get_error_class_display(), ERROR_TONES.get(obj.error_class, "muted"))

    @admin.display(description="state", ordering="state")
    def state_badge(self, obj):
        return badge(obj.state, obj.get_state_display(), STATE_TONES.get(obj.state, "muted"))

    @admin.display(description="error")
    def error_text(self, obj):
        return format_html('<pre class="ef-pre">{}</pre>', obj.error)

    @admin.display(description="payload")
    def payload_pretty(self, obj):
        payload = dict(obj.payload) if isinstance(obj.payload, dict) else obj.payload
        if isinstance(payload, dict) and isinstance(payload.get("data"), str):
            with contextlib.suppress(ValueError):
                payload["data"] = json.loads(payload["data"])
        return format_html('<pre class="ef-pre">{}</pre>', json.dumps(payload, indent=2, ensure_ascii=False))

    @admin.action(description="Requeue through the outbox (replay)", permissions=["change"])
    def requeue_letters(self, request, queryset):
        def requeue(letter: DeadLetter) -> None:
            dead_letter_requeue(letter=letter, actor=request.user)

        apply_each(self, request, queryset.defer(None), requeue, verb="Requeued", refused=DeadLetterRefused)
        return back_to_object(self, request)

    @admin.action(description="Resolve (asks for a note)", permissions=["change"])
    def resolve_letters(self, request, queryset):
        def resolve_all(data: dict) -> None:
            def resolve(letter: DeadLetter) -> None:
                dead_letter_resolve(letter=letter, actor=request.user, note=data["note"])

            apply_each(self, request, queryset, resolve, verb="Resolved", refused=DeadLetterRefused)

        confirming = confirm_with_form(
            self,
            request,
            queryset,
            form_class=ResolveForm,
            action="resolve_letters",
            title="Resolve dead letters",
            confirm_label="Resolve",
            explanation="Resolved letters are closed: they are neither requeued nor shown as open.",
            describe=lambda letter: f"#{letter.pk} {letter} [{letter.state}]",
            apply=resolve_all,
        )
        return confirming or back_to_object(self, request)

    def get_urls(self):
        view = self.admin_site.admin_view(partial(health_page, modeladmin=self))
        return [path("health/", view, name="pipeline_health"), *super().get_urls()]


@admin.register(LLMCall)
class LLMCallAdmin(MachineRecordsAdmin):
    list_display = (
        "created_at",
        "prompt",
        "model",
        "item_link",
        "latency_ms",
        "input_tokens",
        "output_tokens",
        "reasoning_tokens",
        "outcome",
    )
    list_filter = ("prompt", "outcome", "model", "created_at")
    search_fields = ("=item__id", "prompt", "model")
    ordering = ("-created_at",)
    show_full_result_count = False
    change_list_template = "admin/pipeline/llmcall/change_list.html"

    def get_queryset(self, request):
        return super().get_queryset(request).defer("error")

    @admin.display(description="item", ordering="item_id")
    def item_link(self, obj):
        if obj.item_id is None:
            return "-"
        url = reverse("admin:items_processeditem_change", args=[obj.item_id])
        return format_html('<a href="{}">{}</a>', url, obj.item_id)

    def get_urls(self):
        view = self.admin_site.admin_view(partial(prompts_page, modeladmin=self))
        return [path("prompts/", view, name="pipeline_prompts"), *super().get_urls()]


@admin.register(LLMCallHourly)
class LLMCallHourlyAdmin(MachineRecordsAdmin):
    """Model calls rolled up per hour as their rows are pruned (LLM_CALL_RETENTION_HOURS): the cost history."""

    list_display = (
        "hour",
        "prompt",
        "model",
        "outcome",
        "calls",
        "average_ms",
        "latency_ms_max",
        "input_tokens",
        "output_tokens",
        "reasoning_tokens",
    )
    list_filter = ("prompt", "outcome", "model", "hour")
    ordering = ("-hour", "prompt")
    show_full_result_count = False

    @admin.display(description="avg ms")
    def average_ms(self, obj):
        return round(obj.latency_ms_sum / obj.calls, 1) if obj.calls else 0


def item_model_calls_panel(item: ProcessedItem):
    """The model calls made for an item, on its admin page (registered into the items admin)."""
    calls = list(
        LLMCall.objects.filter(item_id=item.pk)
        .only(
            "prompt",
            "model",
            "latency_ms",
            "input_tokens",
            "output_tokens",
            "reasoning_tokens",
            "outcome",
            "error",
            "created_at",
        )
        .order_by("created_at", "pk")
    )
    letters = list(
        DeadLetter.objects.filter(subject=str(item.pk)).only(
            "pk", "stream", "group", "state", "error_class", "failed_at"
        )
    )
    return render_to_string("admin/pipeline/item_model_calls.html", {"calls": calls, "letters": letters})


if item_model_calls_panel not in ITEM_DETAIL_PANELS:
    ITEM_DETAIL_PANELS.append(item_model_calls_panel)
from pipeline import admin_analyzer  # noqa: E402,F401  (registers the analyzer models' page)
