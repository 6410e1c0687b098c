"""The keyword blacklist's admin (docs/admin.md#blacklist): every write goes through the blacklist services,
which invalidate the pipeline's cached list after commit."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.db import transaction

from items.admin.actions import report
from items.models import BlacklistKeyword
from items.services.blacklist import blacklist_keyword_create, blacklist_keyword_delete, blacklist_keyword_update


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
