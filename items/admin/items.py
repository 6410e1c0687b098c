"""The moderator's item pages (docs/admin.md#items): the changelist with its filters, the read-only detail page
with the decision history and the panels other apps add, and the requeue / approve / take-down actions."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import admin
from django.db import connection
from django.db.models import Exists, OuterRef
from django.utils import timezone
from django.utils.dateformat import format as date_format
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from items.admin.actions import apply_each, badge, confirm_with_form, note_form
from items.admin.outcome import OutcomeFields
from items.admin.review import back_to_queue, review_urls
from items.models import (
    EXTRACTED_FIELDS,
    VERDICT_TAKEN_DOWN,
    DecisionStage,
    ItemStatus,
    ModerationDecision,
    ProcessedItem,
)
from items.selectors import item_takedown_decision, last_moderator_verdict
from items.services.moderation import (
    APPROVE_FROM,
    TAKEDOWN_FROM,
    ActionRefused,
    item_approve,
    item_requeue,
    item_review_approve,
    item_review_reject,
    item_takedown,
    requeue_allowed,
)

# Panels other apps add to an item's page (the pipeline adds its model calls): items never imports pipeline.
# Each takes the item and returns rendered HTML.
ITEM_DETAIL_PANELS: list[Callable[[ProcessedItem], SafeString]] = []

# Changelist columns are cut to this many characters (an ellipsis marks the cut) so the list fits 1600 px.
TAKEN_DOWN_LABEL = "taken down by a moderator"
EXCERPT_CHARS = 60
AUTHOR_CHARS = 24

STATUS_COLOURS = {
    ItemStatus.PENDING: "pending",
    ItemStatus.PROCESSING: "processing",
    ItemStatus.COMPLETED: "ok",
    ItemStatus.DISCARDED: "bad",
    ItemStatus.FAILED: "bad",
    ItemStatus.DELETED: "muted",
    ItemStatus.REVIEW: "warn",
}


class SafetyFlagFilter(admin.SimpleListFilter):
    title = "safety flag"
    parameter_name = "safety_flag"

    def lookups(self, request, model_admin):
        flags = (
            ModerationDecision.objects.filter(stage=DecisionStage.SAFETY)
            .exclude(category__in=["", "none"])
            .order_by("category")
            .values_list("category", flat=True)
            .distinct()
        )
        return [(flag, flag) for flag in flags]

    def queryset(self, request, queryset):
        if not self.value():
            return queryset
        flagged = ModerationDecision.objects.filter(
            item=OuterRef("pk"), stage=DecisionStage.SAFETY, category=self.value()
        )
        return queryset.filter(Exists(flagged))


class DomainFilter(admin.SimpleListFilter):
    title = "domain"
    parameter_name = "domain"

    def lookups(self, request, model_admin):
        table = ProcessedItem._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT d, count(*) FROM (SELECT unnest(domains) AS d FROM {table}) t "  # noqa: S608 - table name
                "GROUP BY d ORDER BY 2 DESC, 1 LIMIT 30"
            )
            return [(domain, domain) for domain, _ in cursor.fetchall()]

    def queryset(self, request, queryset):
        return queryset.filter(domains__contains=[self.value()]) if self.value() else queryset


TakedownForm = note_form(
    "reason",
    max_length=2000,
    help_text="Shown to moderators in the item's history; the author only sees 'content evaluation'.",
)

RejectForm = note_form(
    "reason",
    max_length=2000,
    help_text="Why the held item is refused: shown to moderators; the author only sees 'content evaluation'.",
)


@admin.register(ProcessedItem)
class ProcessedItemAdmin(OutcomeFields, admin.ModelAdmin):
    # Fits a 1600 px window beside the filters: the analyzer, group and processing time are on the item's page.
    list_display = ("id_link", "outcome", "excerpt", "broadcast_type", "quality", "author_name", "created")
    list_display_links = ("id_link",)
    list_filter = ("status", "reason", SafetyFlagFilter, "broadcast_type", DomainFilter, "created_at")
    list_select_related = ("author", "raw")
    search_fields = ("raw__content", "summary")
    search_help_text = "An item id, or words from the content or summary."
    show_full_result_count = False
    list_per_page = 50
    ordering = ("-created_at",)
    actions = ("requeue_items", "approve_items", "take_down_items", "approve_held_items", "reject_held_items")
    change_form_template = "admin/items/processeditem/change_form.html"
    fieldsets = (
        ("Broadcast", {"fields": ("author", "raw_content", "raw_notes", "raw_url", "created_at")}),
        (
            "Outcome",
            {
                "fields": (
                    "status_badge",
                    "reason_badge",
                    *OutcomeFields.outcome_fields,
                    "duplicate_of",
                    "attempts",
                    "last_error",
                    "processed_at",
                    "updated_at",
                )
            },
        ),
        ("Extracted", {"fields": (*EXTRACTED_FIELDS, "expire_time", "suggestion", "group_id")}),
    )

    # Read-only: every change goes through an action (a service with a conditional update), never a form save.
    def get_readonly_fields(self, request, obj=None):
        return [field for fieldset in self.fieldsets for field in fieldset[1]["fields"]]

    def get_urls(self):
        return [*review_urls(self), *super().get_urls()]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        """Never write the row from a form: it would overwrite what the pipeline did meanwhile."""

    def get_queryset(self, request):
        fields = super().get_queryset(request).defer("embedding", "search_vector", "extraction", "raw__notes")
        return fields.annotate(moderator_verdict=last_moderator_verdict())

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if term.isascii() and term.isdigit() and len(term) <= 18:
            return queryset.filter(pk=int(term)), False
        return super().get_search_results(request, queryset, search_term)

    @admin.display(description="id", ordering="pk")
    def id_link(self, obj):
        return str(obj.pk)

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj):
        return badge(obj.status, obj.get_status_display(), STATUS_COLOURS.get(obj.status, "muted"))

    @admin.display(description="reason", ordering="reason")
    def reason_badge(self, obj):
        """On the item's page: for a moderator's take-down, who took it down, when and why."""
        takedown = item_takedown_decision(obj) if self._taken_down(obj) else None
        if takedown is not None:
            who = takedown.moderator.get_username() if takedown.moderator else takedown.actor
            when = date_format(timezone.localtime(takedown.created_at), "Y-m-d H:i:s T")
            return format_html(
                "{}<br>by {} at {}: {}<br><small>The author sees 'content evaluation'.</small>",
                badge("taken_down", TAKEN_DOWN_LABEL, "bad"),
                who,
                when,
                takedown.reason or "-",
            )
        if not obj.reason:
            return ""
        return badge(obj.reason, obj.get_reason_display(), "warn")

    @staticmethod
    def _taken_down(obj) -> bool:
        return obj.status == ItemStatus.DISCARDED and getattr(obj, "moderator_verdict", None) == VERDICT_TAKEN_DOWN

    @admin.display(description="outcome", ordering="status")
    def outcome(self, obj):
        """The status, and under it the public reason when there is one (or that a moderator took it down)."""
        if self._taken_down(obj):
            return format_html("{}<br>{}", self.status_badge(obj), badge("taken_down", TAKEN_DOWN_LABEL, "bad"))
        if not obj.reason:
            return self.status_badge(obj)
        return format_html("{}<br>{}", self.status_badge(obj), badge(obj.reason, obj.get_reason_display(), "warn"))

    @admin.display(description="broadcast")
    def excerpt(self, obj):
        return Truncator(obj.summary or obj.raw.content).chars(EXCERPT_CHARS)

    @admin.display(description="author", ordering="author__name")
    def author_name(self, obj):
        return Truncator(obj.author.name).chars(AUTHOR_CHARS)

    @admin.display(description="created", ordering="created_at")
    def created(self, obj):
        return date_format(timezone.localtime(obj.created_at), "Y-m-d H:i")

    @admin.display(description="content")
    def raw_content(self, obj):
        return format_html('<div class="ef-content">{}</div>', obj.raw.content)

    @admin.display(description="notes")
    def raw_notes(self, obj):
        return obj.raw.notes

    @admin.display(description="url")
    def raw_url(self, obj):
        return obj.raw.url

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = extra_context or {}
        item = self.get_object(request, object_id)
        if item is not None:
            extra_context.update(self.detail_context(item))
        extra_context.update(show_save=False, show_save_and_continue=False, show_save_and_add_another=False)
        return super().change_view(request, object_id, form_url, extra_context)

    def detail_context(self, item: ProcessedItem) -> dict:
        decisions = item.decisions.select_related("moderator").order_by("created_at", "pk")
        group = []
        if item.group_id:
            group = list(
                ProcessedItem.objects.filter(group_id=item.group_id)
                .exclude(pk=item.pk)
                .only("pk", "status", "summary", "author_id", "created_at")
                .order_by("-created_at")[:20]
            )
        return {
            "decisions": decisions,
            "group_items": group,
            "panels": [panel(item) for panel in ITEM_DETAIL_PANELS],
            "item_actions": [
                (action, label, "" if allowed else f"Not possible for a {item.status} item")
                for action, label, allowed in (
                    ("requeue_items", "Requeue", requeue_allowed(item)),
                    ("approve_items", "Approve", item.status in APPROVE_FROM),
                    ("take_down_items", "Take down", item.status in TAKEDOWN_FROM),
                    ("approve_held_items", "Approve (review)", item.status == ItemStatus.REVIEW),
                    ("reject_held_items", "Reject (review)", item.status == ItemStatus.REVIEW),
                )
            ],
        }

    def _each(self, request, queryset, service, verb: str, **kwargs) -> None:
        items = queryset.defer("embedding", "search_vector", "extraction")
        apply_each(
            self,
            request,
            items,
            lambda item: service(item=item, moderator=request.user, **kwargs),
            verb=verb,
            refused=ActionRefused,
        )

    @admin.action(description="Requeue: re-run enrichment (also releases a stuck claim)", permissions=["change"])
    def requeue_items(self, request, queryset):
        self._each(request, queryset, item_requeue, "Requeued")

    @admin.action(description="Approve: override the discard", permissions=["change"])
    def approve_items(self, request, queryset):
        self._each(request, queryset, item_approve, "Approved")

    @admin.action(description="Take down (asks for a reason)", permissions=["change"])
    def take_down_items(self, request, queryset):
        return confirm_with_form(
            self,
            request,
            queryset,
            form_class=TakedownForm,
            action="take_down_items",
            title="Take down items",
            confirm_label="Take down",
            explanation="These items will be discarded and their authors told 'content evaluation'.",
            describe=lambda item: f"item {item.pk} [{item.status}]: {item.summary or ''}",
            apply=lambda data: self._each(request, queryset, item_takedown, "Took down", reason=data["reason"]),
        )

    @admin.action(description="Review queue: approve (publish the held item)", permissions=["change"])
    def approve_held_items(self, request, queryset):
        self._each(request, queryset, item_review_approve, "Approved")
        return back_to_queue(request)

    @admin.action(description="Review queue: reject (asks for a reason)", permissions=["change"])
    def reject_held_items(self, request, queryset):
        def apply(data: dict) -> None:
            self._each(request, queryset, item_review_reject, "Rejected", reason=data["reason"])

        confirming = confirm_with_form(
            self,
            request,
            queryset,
            form_class=RejectForm,
            action="reject_held_items",
            title="Reject held items",
            confirm_label="Reject",
            explanation="These held items will be discarded and their authors told 'content evaluation'.",
            describe=lambda item: f"item {item.pk} [{item.status}]: {item.summary or ''}",
            apply=apply,
        )
        return confirming or back_to_queue(request)
