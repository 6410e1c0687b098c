"""The moderator's admin for the items domain (docs/admin.md): items with their outcome and overrides, the keyword
blacklist, agents and their tokens. Actions call one service per row and report counts and refusals."""

from __future__ import annotations

from collections.abc import Callable

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db import connection, transaction
from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.template.response import TemplateResponse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from items.models import (
    Agent,
    AgentToken,
    BlacklistKeyword,
    DecisionStage,
    ItemStatus,
    ModerationDecision,
    ProcessedItem,
)
from items.services.agents import (
    AgentNameRefused,
    IssuedToken,
    agent_create,
    agent_name_check,
    agent_rename,
    agent_token_create,
    agent_token_revoke,
)
from items.services.blacklist import blacklist_keyword_create, blacklist_keyword_delete, blacklist_keyword_update
from items.services.moderation import (
    APPROVE_FROM,
    TAKEDOWN_FROM,
    ActionRefused,
    item_approve,
    item_requeue,
    item_takedown,
    requeue_allowed,
)

# Panels other apps add to an item's page (the pipeline adds its model calls): items never imports pipeline.
# Each takes the item and returns rendered HTML.
ITEM_DETAIL_PANELS: list[Callable[[ProcessedItem], SafeString]] = []

STATUS_COLOURS = {
    ItemStatus.PENDING: "pending",
    ItemStatus.PROCESSING: "processing",
    ItemStatus.COMPLETED: "ok",
    ItemStatus.DISCARDED: "bad",
    ItemStatus.FAILED: "bad",
    ItemStatus.DELETED: "muted",
}


def badge(value: str, label: str, tone: str) -> SafeString:
    return format_html('<span class="ef-badge ef-{}" data-value="{}">{}</span>', tone, value, label)


def report(modeladmin: admin.ModelAdmin, request, verb: str, done: int, refusals: list[str]) -> None:
    """One success line with the count, one warning line listing each refusal and its reason."""
    noun = modeladmin.model._meta.verbose_name if done == 1 else modeladmin.model._meta.verbose_name_plural
    modeladmin.message_user(request, f"{verb} {done} {noun}.", messages.SUCCESS if done else messages.INFO)
    if refusals:
        modeladmin.message_user(
            request,
            f"{len(refusals)} refused: " + "; ".join(refusals[:20]) + (" …" if len(refusals) > 20 else ""),
            messages.WARNING,
        )


# --- items -----------------------------------------------------------------------------------------------


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


class TakedownForm(forms.Form):
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        max_length=2000,
        help_text="Shown to moderators in the item's history; the author only sees 'content evaluation'.",
    )


@admin.register(ProcessedItem)
class ProcessedItemAdmin(admin.ModelAdmin):
    list_display = (
        "id_link",
        "status_badge",
        "reason_badge",
        "excerpt",
        "broadcast_type",
        "quality",
        "analyzer",
        "group_id",
        "author",
        "created_at",
        "processed_at",
    )
    list_display_links = ("id_link",)
    list_filter = ("status", "reason", SafetyFlagFilter, "broadcast_type", DomainFilter, "created_at")
    list_select_related = ("author", "raw")
    search_fields = ("raw__content", "summary")
    search_help_text = "An item id, or words from the content or summary."
    show_full_result_count = False
    list_per_page = 50
    ordering = ("-created_at",)
    actions = ("requeue_items", "approve_items", "take_down_items")
    change_form_template = "admin/items/processeditem/change_form.html"
    fieldsets = (
        ("Broadcast", {"fields": ("author", "raw_content", "raw_notes", "raw_url", "created_at")}),
        (
            "Outcome",
            {
                "fields": (
                    "status_badge",
                    "reason_badge",
                    "duplicate_of",
                    "analyzer",
                    "attempts",
                    "last_error",
                    "processed_at",
                    "updated_at",
                )
            },
        ),
        (
            "Extracted",
            {
                "fields": (
                    "broadcast_type",
                    "summary",
                    "keywords",
                    "domains",
                    "lang",
                    "quality",
                    "timeliness",
                    "geo",
                    "source_type",
                    "expected_response",
                    "expire_time",
                    "suggestion",
                    "group_id",
                )
            },
        ),
    )

    # Read-only: every change goes through an action (a service with a conditional update), never a form save.
    def get_readonly_fields(self, request, obj=None):
        return [field for fieldset in self.fieldsets for field in fieldset[1]["fields"]]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        """Never write the row from a form: it would overwrite what the pipeline did meanwhile."""

    def get_queryset(self, request):
        return super().get_queryset(request).defer("embedding", "search_vector", "extraction", "raw__notes")

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
        if not obj.reason:
            return "-"
        return badge(obj.reason, obj.get_reason_display(), "warn")

    @admin.display(description="broadcast")
    def excerpt(self, obj):
        text = obj.summary or obj.raw.content
        return text if len(text) <= 80 else text[:79] + "…"

    @admin.display(description="content")
    def raw_content(self, obj):
        return format_html('<div class="ef-content">{}</div>', obj.raw.content)

    @admin.display(description="notes")
    def raw_notes(self, obj):
        return obj.raw.notes or "-"

    @admin.display(description="url")
    def raw_url(self, obj):
        return obj.raw.url or "-"

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
                ("requeue_items", "Requeue", requeue_allowed(item)),
                ("approve_items", "Approve", item.status in APPROVE_FROM),
                ("take_down_items", "Take down", item.status in TAKEDOWN_FROM),
            ],
        }

    def _each(self, request, queryset: QuerySet, service, verb: str, **kwargs) -> None:
        done, refusals = 0, []
        for item in queryset.defer("embedding", "search_vector", "extraction"):
            try:
                service(item=item, moderator=request.user, **kwargs)
            except ActionRefused as exc:
                refusals.append(str(exc))
                continue
            done += 1
        report(self, request, verb, done, refusals)

    @admin.action(description="Requeue: re-run enrichment (also releases a stuck claim)", permissions=["change"])
    def requeue_items(self, request, queryset):
        self._each(request, queryset, item_requeue, "Requeued")

    @admin.action(description="Approve: override the discard", permissions=["change"])
    def approve_items(self, request, queryset):
        self._each(request, queryset, item_approve, "Approved")

    @admin.action(description="Take down (asks for a reason)", permissions=["change"])
    def take_down_items(self, request, queryset):
        form = TakedownForm(request.POST if "confirm" in request.POST else None)
        if form.is_bound and form.is_valid():
            self._each(request, queryset, item_takedown, "Took down", reason=form.cleaned_data["reason"])
            return None
        return TemplateResponse(
            request,
            "admin/confirm_action.html",
            {
                **self.admin_site.each_context(request),
                "title": "Take down items",
                "opts": self.model._meta,
                "queryset": queryset,
                "objects": [f"item {item.pk} [{item.status}]: {item.summary or ''}" for item in queryset],
                "form": form,
                "action": "take_down_items",
                "action_checkbox_name": ACTION_CHECKBOX_NAME,
                "confirm_label": "Take down",
                "explanation": "These items will be discarded and their authors told 'content evaluation'.",
            },
        )


# --- blacklist -------------------------------------------------------------------------------------------


class BlacklistKeywordForm(forms.ModelForm):
    class Meta:
        model = BlacklistKeyword
        fields = ("keyword", "enabled")

    def clean_keyword(self):
        keyword = self.cleaned_data["keyword"].strip().lower()
        if not keyword:
            raise forms.ValidationError("A keyword must not be blank.")
        clash = BlacklistKeyword.objects.filter(keyword__iexact=keyword).exclude(pk=self.instance.pk)
        if clash.exists():
            raise forms.ValidationError(f"“{keyword}” is already on the blacklist (keywords ignore case).")
        return keyword

    def validate_constraints(self):
        """clean_keyword already checks the case-insensitive uniqueness, with a clearer message."""


@admin.register(BlacklistKeyword)
class BlacklistKeywordAdmin(admin.ModelAdmin):
    form = BlacklistKeywordForm
    list_display = ("keyword", "enabled", "updated_at", "created_at")
    list_filter = ("enabled",)
    search_fields = ("keyword",)
    ordering = ("keyword",)
    actions = ("enable_keywords", "disable_keywords")

    # Writes go through the services, which invalidate the pipeline's Redis cache after commit.
    def save_model(self, request, obj, form, change):
        if change:
            blacklist_keyword_update(record=obj, keyword=obj.keyword, enabled=obj.enabled)
        else:
            created = blacklist_keyword_create(keyword=obj.keyword, enabled=obj.enabled)
            obj.pk, obj.created_at, obj.updated_at = created.pk, created.created_at, created.updated_at
            obj._state.adding = False

    def delete_model(self, request, obj):
        blacklist_keyword_delete(record=obj)

    def delete_queryset(self, request, queryset):
        with transaction.atomic():
            for record in queryset:
                blacklist_keyword_delete(record=record)

    def _set_enabled(self, request, queryset, enabled: bool, verb: str) -> None:
        done = 0
        for record in queryset.filter(enabled=not enabled):
            blacklist_keyword_update(record=record, keyword=record.keyword, enabled=enabled)
            done += 1
        report(self, request, verb, done, [])

    @admin.action(description="Enable selected keywords", permissions=["change"])
    def enable_keywords(self, request, queryset):
        self._set_enabled(request, queryset, True, "Enabled")

    @admin.action(description="Disable selected keywords", permissions=["change"])
    def disable_keywords(self, request, queryset):
        self._set_enabled(request, queryset, False, "Disabled")


# --- agents and tokens -----------------------------------------------------------------------------------


def token_page(modeladmin: admin.ModelAdmin, request, issued: list[IssuedToken]) -> TemplateResponse:
    """Shows new tokens once, in this response only: they are never stored or put in a message cookie."""
    response = TemplateResponse(
        request,
        "admin/items/agent/token_issued.html",
        {
            **modeladmin.admin_site.each_context(request),
            "title": "New API token" if len(issued) == 1 else "New API tokens",
            "opts": Agent._meta,
            "issued": issued,
        },
    )
    response["Cache-Control"] = "no-store"
    return response


class AgentTokenInline(admin.TabularInline):
    model = AgentToken
    fields = ("prefix", "label", "created_at", "last_used_at", "revoked_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None):
        return False


class AgentForm(forms.ModelForm):
    """Checks the name as the services will (unique after normalisation, official name reserved), so the
    moderator sees the reason on the form instead of an error page."""

    class Meta:
        model = Agent
        fields = ("name", "is_official", "is_active", "bio", "offers", "seeks")

    def clean(self):
        cleaned = super().clean()
        if "name" in cleaned:
            is_official = cleaned.get("is_official", self.instance.is_official)
            try:
                cleaned["name"], _ = agent_name_check(
                    name=cleaned["name"], is_official=is_official, agent=self.instance if self.instance.pk else None
                )
            except AgentNameRefused as exc:
                self.add_error("name", str(exc))
        return cleaned


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    form = AgentForm
    list_display = ("name", "id", "is_official", "is_active", "active_tokens", "created_at")
    list_filter = ("is_official", "is_active")
    search_fields = ("name", "email")
    ordering = ("-created_at",)
    inlines = (AgentTokenInline,)
    actions = ("issue_tokens", "revoke_all_tokens")
    readonly_fields = ("profile_keywords", "created_at", "updated_at")

    def get_readonly_fields(self, request, obj=None):
        # Only a superuser may make an agent official (it speaks for the network).
        if request.user.is_superuser:
            return self.readonly_fields
        return (*self.readonly_fields, "is_official")

    def get_fields(self, request, obj=None):
        if obj is None:  # creating: a token is issued with the agent and shown once
            return ("name", "email", "bio", "is_official")
        return (
            "name",
            "email",
            "is_official",
            "is_active",
            "bio",
            "offers",
            "seeks",
            "profile_keywords",
            "created_at",
        )

    def get_inlines(self, request, obj):
        return self.inlines if obj is not None else ()  # creating: no tokens to list yet

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(_active_tokens=Count("tokens", filter=Q(tokens__revoked_at__isnull=True)))
        )

    def has_delete_permission(self, request, obj=None):
        return False  # agents own items (PROTECT); deactivate them instead

    @admin.display(description="active tokens", ordering="_active_tokens")
    def active_tokens(self, obj):
        return obj._active_tokens

    def save_model(self, request, obj, form, change):
        if change:
            with transaction.atomic():
                agent_rename(agent=obj, name=obj.name)  # keeps the unique name key in step
                super().save_model(request, obj, form, change)
            return
        with transaction.atomic():
            agent = agent_create(name=obj.name, bio=obj.bio, is_official=obj.is_official, email=obj.email)
            request._issued_tokens = [agent_token_create(agent=agent, label="admin")]
        obj.pk, obj.name, obj.created_at, obj.updated_at = agent.pk, agent.name, agent.created_at, agent.updated_at
        obj._state.adding = False

    def save_related(self, request, form, formsets, change):
        if change:
            super().save_related(request, form, formsets, change)

    def response_add(self, request, obj, post_url_continue=None):
        issued = getattr(request, "_issued_tokens", None)
        if issued:
            return token_page(self, request, issued)
        return super().response_add(request, obj, post_url_continue)

    @admin.action(description="Issue a new token (shown once)", permissions=["change"])
    def issue_tokens(self, request, queryset):
        if not request.user.is_superuser and queryset.filter(is_official=True).exists():
            # A token for the official agent would let a moderator speak as the network itself.
            self.message_user(request, "Only a superuser may issue tokens for the official agent.", messages.ERROR)
            return None
        issued = [agent_token_create(agent=agent, label="admin") for agent in queryset]
        return token_page(self, request, issued)

    @admin.action(description="Revoke all tokens", permissions=["change"])
    def revoke_all_tokens(self, request, queryset):
        done = 0
        for token in AgentToken.objects.filter(agent__in=queryset, revoked_at__isnull=True):
            done += agent_token_revoke(token=token)
        self.message_user(request, f"Revoked {done} tokens.", messages.SUCCESS if done else messages.INFO)


class TokenStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("active", "active"), ("revoked", "revoked")]

    def queryset(self, request, queryset):
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


@admin.register(AgentToken)
class AgentTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "agent", "label", "created_at", "last_used_at", "revoked_at")
    list_filter = (TokenStateFilter,)
    list_select_related = ("agent",)
    search_fields = ("prefix", "agent__name", "label")
    ordering = ("-created_at",)
    actions = ("revoke_tokens",)
    fields = ("agent", "prefix", "label", "created_at", "last_used_at", "revoked_at")
    readonly_fields = fields

    def has_add_permission(self, request):
        return False  # tokens are issued from the agent page (the secret is shown once there)

    def has_delete_permission(self, request, obj=None):
        return False  # revoked tokens stay as a record

    @admin.action(description="Revoke selected tokens", permissions=["change"])
    def revoke_tokens(self, request, queryset):
        done, refusals = 0, []
        for token in queryset:
            if agent_token_revoke(token=token):
                done += 1
            else:
                refusals.append(f"{token.prefix}… was already revoked")
        report(self, request, "Revoked", done, refusals)
