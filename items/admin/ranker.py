"""The learned feed rankers in the admin (docs/feed-ranker.md#the-admin): every model `manage.py train_ranker`
stored, which one is active, its held-out metrics against what it was gated on, the training data it saw, and
whether it passes its checks in this code. Machine-made and read-only; a superuser may activate an earlier
model that passed the gate (a rollback), never one the gate refused or one that no longer checks."""

from __future__ import annotations

import json

from django.contrib import admin, messages
from django.utils.html import format_html, format_html_join

from items.admin.actions import badge
from items.models import RankerModel, RankerModelStatus
from items.ranker.model import ModelRefused, model_load
from items.ranker.serving import ranker_activate

TONES = {"active": "ok", "stored": "info", "retired": "muted", "refused": "bad"}


def _figure(value) -> str:
    return "-" if value is None else f"{value:.3f}"


@admin.register(RankerModel)
class RankerModelAdmin(admin.ModelAdmin):
    list_display = ("id", "state", "created_at", "activated_at", "held_out", "gated_on", "training_data", "checks")
    list_filter = ("status",)
    ordering = ("-created_at",)
    actions = ("activate",)
    fields = (
        "state",
        "contract",
        "created_at",
        "activated_at",
        "reason",
        "held_out",
        "gated_on",
        "training_data",
        "checks",
        "weights",
        "provenance",
    )
    readonly_fields = fields

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_rollback_permission(self, request):
        return request.user.is_active and request.user.is_superuser

    @admin.display(description="status", ordering="status")
    def state(self, model: RankerModel):
        return badge(model.status, model.get_status_display(), TONES.get(model.status, "info"))

    @admin.display(description="held out: AUC / logged nDCG / IPS")
    def held_out(self, model: RankerModel) -> str:
        held = model.metrics.get("held_out", {})
        return " / ".join(_figure(held.get(name)) for name in ("auc", "logged_ndcg", "ips"))

    @admin.display(description="gated on")
    def gated_on(self, model: RankerModel) -> str:
        base = model.metrics.get("baseline", {})
        figures = " / ".join(_figure(base.get(name)) for name in ("auc", "logged_ndcg", "ips"))
        return f"{base.get('ranking', '-')}: {figures}"

    @admin.display(description="training data")
    def training_data(self, model: RankerModel) -> str:
        provenance = model.document.get("provenance", {})
        train, held = provenance.get("train", {}), provenance.get("held_out", {})
        return (
            f"{train.get('rows', 0)} impressions ({train.get('positives', 0)} positive, {train.get('readers', 0)} "
            f"readers) {' to '.join(train.get('days', []))}; held out {held.get('rows', 0)} "
            f"({held.get('positives', 0)} positive) {' to '.join(held.get('days', []))}; "
            f"data {provenance.get('data_hash', '-')}"
        )

    @admin.display(description="checks in this code")
    def checks(self, model: RankerModel) -> str:
        try:
            model_load(model.document, model_id=model.pk)
        except ModelRefused as exc:
            return f"refused ({exc.reason}): {exc}"
        return "contract and self-tests pass"

    @admin.display(description="weights")
    def weights(self, model: RankerModel):
        pairs = zip(model.document.get("features", []), model.document.get("weights", []), strict=False)
        rows = format_html_join("", "<tr><td>{}</td><td>{}</td></tr>", ((name, f"{w:+.3f}") for name, w in pairs))
        return format_html("<table>{}</table>", rows) if rows else "-"

    @admin.display(description="provenance")
    def provenance(self, model: RankerModel):
        return format_html("<pre>{}</pre>", json.dumps(model.document.get("provenance", {}), indent=2))

    @admin.action(description="Activate this model (roll back to it)", permissions=["rollback"])
    def activate(self, request, queryset):
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one model to activate.", messages.WARNING)
            return
        model = queryset.get()
        if model.status == RankerModelStatus.ACTIVE:
            self.message_user(request, f"Model {model.pk} is already active.", messages.INFO)
            return
        try:
            ranker_activate(model=model, actor=request.user.get_username(), reason="rollback in the admin")
        except ModelRefused as exc:
            self.message_user(request, f"Model {model.pk} not activated: {exc}", messages.ERROR)
            return
        self.message_user(request, f"Model {model.pk} is active; web processes pick it up within seconds.")
