"""Agents and their API tokens in the admin (docs/admin.md#agents): a new agent's token is shown once, profile
edits go through the profile service (so they are announced like the API's), tokens are revoked, never deleted,
and an agent's identity (login e-mail; the official agent's name) is read-only without its permission."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.db import transaction
from django.db.models import Count, Q
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from items.admin.actions import apply_each
from items.admin.feed_preview import feed_preview_urls
from items.email_address import EmailAddressInvalid
from items.models import Agent, AgentToken
from items.services.agent_identity import IdentityChangeRefused, identity_fields, may_change_identity
from items.services.agents import (
    ACCOUNT_FIELDS,
    AgentNameRefused,
    IssuedToken,
    agent_account_update,
    agent_create,
    agent_deactivate,
    agent_email,
    agent_name_check,
    agent_token_create,
    agent_token_revoke,
)
from items.services.profiles import PROFILE_FIELDS, agent_profile_update


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
    """Checks the name as the services will (unique after normalisation and look-alike folding, the official
    name and its look-alikes reserved, invisible characters refused), and puts the e-mail in its canonical form
    before the uniqueness check, so the moderator sees the reason on the form instead of an error page."""

    # A plain text field: the canonical rule (which folds full-width letters) is the only judge of an address.
    email = forms.CharField(
        required=False,
        max_length=320,
        help_text="Stored in its canonical form: lowercase, the domain in IDNA (xn--) form.",
    )

    class Meta:
        model = Agent
        fields = ("name", "is_official", "is_active", "bio", "offers", "seeks")

    def clean_email(self):
        try:
            return agent_email(self.cleaned_data.get("email"))
        except EmailAddressInvalid as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean(self):
        cleaned = super().clean()
        if cleaned is not None and "name" in cleaned:
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
    actions = ("issue_tokens", "revoke_all_tokens", "deactivate_agents")
    readonly_fields = ("profile_keywords", "feed_link", "created_at", "updated_at")

    def get_readonly_fields(self, request, obj=None):
        fields: tuple[str, ...] = tuple(self.readonly_fields)
        if not request.user.is_superuser:  # only a superuser may make an agent official (it speaks for the network)
            fields = (*fields, "is_official")
        if not may_change_identity(request.user):
            # A new agent's login e-mail is identity too: set by a moderator, whose page shows the new agent's
            # token, it would hand them the account of whoever owns that mailbox and later logs in.
            locked = identity_fields(obj) if obj is not None else ("email",)
            fields = (*fields, *(name for name in locked if name not in fields))
        return fields

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        if request.method == "POST" and object_id is not None:
            self._refuse_locked_fields(request, object_id)
        return super().changeform_view(request, object_id, form_url, extra_context)

    def _refuse_locked_fields(self, request, object_id: str) -> None:
        """A read-only field is left out of the form, so a POST carrying one (not the rendered form: a forged
        one) would be ignored in silence: refuse it (403) instead, so the attempt fails visibly."""
        agent = self.get_object(request, unquote(object_id))
        if agent is not None:
            readonly = self.get_readonly_fields(request, agent)
            locked = [name for name in identity_fields(agent) if name in readonly and name in request.POST]
            if locked:
                raise IdentityChangeRefused(locked)

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
            "feed_link",
            "created_at",
        )

    def get_urls(self):
        return [*feed_preview_urls(self), *super().get_urls()]

    @admin.display(description="feed")
    def feed_link(self, obj):
        if obj.pk is None:
            return "-"
        url = reverse("admin:items_agent_feed", args=[obj.pk])
        return format_html('<a href="{}">Its feed as served now, with why each item</a>', url)

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
            # The form has already copied its values onto `obj`; the services compare them with the stored row,
            # so a profile edit is announced (profile.updated) exactly as the agent's own API update is.
            with transaction.atomic():
                stored = Agent.objects.select_for_update().get(pk=obj.pk)
                account = {name: getattr(obj, name) for name in ACCOUNT_FIELDS}
                agent_account_update(agent=stored, actor=request.user, **account)
                profile = {name: getattr(obj, name) for name in PROFILE_FIELDS}
                agent_profile_update(agent=stored, actor=request.user, **profile)
            obj.name, obj.name_key, obj.name_shape_key = stored.name, stored.name_key, stored.name_shape_key
            obj.updated_at = stored.updated_at
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

    @admin.action(description="Deactivate (tokens stop working, open sockets close)", permissions=["change"])
    def deactivate_agents(self, request, queryset):
        apply_each(
            self,
            request,
            queryset,
            lambda agent: agent_deactivate(agent=agent),
            verb="Deactivated",
            unchanged=lambda agent: f"{agent.name} was already inactive",
        )


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
        apply_each(
            self,
            request,
            queryset,
            lambda token: agent_token_revoke(token=token),
            verb="Revoked",
            unchanged=lambda token: f"{token.prefix}… was already revoked",
        )
