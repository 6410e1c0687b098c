"""Author milestone rules in the admin (docs/feed-log.md#author-milestones): moderators see and tune them
(threshold, on/off); their text is sent in the official agent's name, so writing it needs
`items.write_official_text` (superusers, or whoever an operator grants it), and a moderator sees it read-only
(a forged POST of it is ignored). Adding or deleting a rule needs the model's own add/delete permissions
(superusers). The milestones items reached are machine-made and read-only."""

from __future__ import annotations

from django import forms
from django.contrib import admin

from items.models import ItemMilestone, MilestoneRule
from items.services.milestones import template_problem

OFFICIAL_TEXT_PERMISSION = "items.write_official_text"


class MilestoneRuleForm(forms.ModelForm):
    class Meta:
        model = MilestoneRule
        fields = ("kind", "threshold", "message_template", "enabled")

    def clean_threshold(self):
        threshold = self.cleaned_data["threshold"]
        if threshold < 1:
            raise forms.ValidationError("A threshold is a count of at least 1.")
        return threshold

    def clean_message_template(self):
        template = self.cleaned_data["message_template"]
        problem = template_problem(template)
        if problem:
            raise forms.ValidationError(problem)
        return template


@admin.register(MilestoneRule)
class MilestoneRuleAdmin(admin.ModelAdmin):
    form = MilestoneRuleForm
    list_display = ("kind", "threshold", "enabled", "message_template", "updated_at")
    list_filter = ("kind", "enabled")
    ordering = ("kind", "threshold")

    def get_readonly_fields(self, request, obj=None):
        if request.user.has_perm(OFFICIAL_TEXT_PERMISSION):
            return ()
        return ("message_template",)


@admin.register(ItemMilestone)
class ItemMilestoneAdmin(admin.ModelAdmin):
    list_display = ("item_id", "kind", "threshold", "reached_at")
    list_filter = ("kind",)
    raw_id_fields = ("item", "rule", "message")
    ordering = ("-reached_at",)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
