"""The admin's page of analyzer models (docs/admin.md, "Analyzer models"): every model `manage.py train_analyzer`
wrote, its figures on the held-out sets beside the model it was compared with, how many moderator labels it learned
from, and which one serves. A user with the `activate_analyzermodel` permission (superusers have it) activates
one, which is how a roll-back is done; "use the shipped model" retires them all."""

from __future__ import annotations

import json

from django.contrib import admin, messages
from django.utils.html import format_html, format_html_join

from pipeline import analyzer_models
from pipeline.llm.local import gates
from pipeline.models import AnalyzerModel


def _figures(figures: dict) -> str:
    rows = ((name, f"{value:.3f}") for name, value in sorted(figures.items()) if isinstance(value, float))
    return format_html("<table>{}</table>", format_html_join("", "<tr><td>{}</td><td>{}</td></tr>", rows))


@admin.register(AnalyzerModel)
class AnalyzerModelAdmin(admin.ModelAdmin):
    list_display = ("pk", "created_at", "state", "moderator_labels", "headline", "activated_by", "activated_at")
    list_filter = ("state",)
    actions = ("activate_model", "use_shipped_model")
    fields = ("state", "created_at", "contract", "moderator_labels", "note", "held_out", "compared", "provenance")
    readonly_fields = fields

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_activate_permission(self, request):
        return request.user.has_perm("pipeline.activate_analyzermodel")

    @admin.display(description="held-out (unsafe stopped / spam blocked)")
    def headline(self, obj: AnalyzerModel) -> str:
        metrics = obj.metrics or {}
        return f"{metrics.get('unsafe_blocked_or_held', 0):.2f} / {metrics.get('spam_blocked', 0):.2f}"

    @admin.display(description="figures on the held-out sets")
    def held_out(self, obj: AnalyzerModel) -> str:
        return _figures(obj.metrics or {})

    @admin.display(description="the model it was compared with")
    def compared(self, obj: AnalyzerModel) -> str:
        return format_html("{} {}", (obj.compared_with or {}).get("version", ""), _figures(obj.compared_with or {}))

    @admin.display(description="provenance")
    def provenance(self, obj: AnalyzerModel) -> str:
        return format_html("<pre>{}</pre>", json.dumps((obj.document or {}).get("provenance", {}), indent=1))

    def changelist_view(self, request, extra_context=None):
        shipped = gates.shipped()
        serving = analyzer_models.active_gates()
        name = "the shipped model" if serving.version == "shipped" else f"model {serving.version}"
        extra = {
            "title": f"Analyzer models — serving: {name}",
            "subtitle": f"shipped model trained from {shipped.provenance.get('examples')} examples",
        }
        return super().changelist_view(request, {**extra, **(extra_context or {})})

    @admin.action(description="Activate this model (roll back or forward)", permissions=["activate"])
    def activate_model(self, request, queryset):
        if queryset.count() != 1:
            self.message_user(request, "Choose exactly one model to activate.", messages.ERROR)
            return
        row = queryset.get()
        try:
            analyzer_models.activate(row, actor=request.user.get_username())
        except gates.ContractMismatch as exc:
            self.message_user(request, f"Model {row.pk} cannot serve: {exc}", messages.ERROR)
            return
        self.message_user(
            request, f"Model {row.pk} is active; every process judges with it within ANALYZER_MODEL_RELOAD_SECONDS."
        )

    @admin.action(description="Retire every model (the shipped model serves)", permissions=["activate"])
    def use_shipped_model(self, request, queryset):
        retired = analyzer_models.deactivate_all(actor=request.user.get_username())
        self.message_user(request, f"{retired} model(s) retired; the shipped model serves.")
