"""The asynchronous side's tables: dead letters, model-call accounting, consumed-event records."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from items.models import RawItem


class DeadLetterState(models.TextChoices):
    OPEN = "open", "open"
    """Waiting for a person (or the auto-requeue job, for transient errors)."""
    REQUEUED = "requeued", "requeued"
    """Sent back through the outbox with `replay` set."""
    RESOLVED = "resolved", "resolved"
    """Closed by a moderator with a note."""


class ErrorClass(models.TextChoices):
    TRANSIENT = "transient", "transient"
    PERMANENT = "permanent", "permanent"


class DeadLetter(models.Model):
    """One row per entry that reached a `{<stream>}:dlq` stream (docs/architecture.md#data-model)."""

    stream = models.CharField(max_length=100, help_text="The origin stream.")
    group = models.CharField(max_length=100)
    message_id = models.CharField(max_length=32, help_text="The entry's id in the origin stream.")
    event_id = models.CharField(max_length=64, blank=True)
    subject = models.CharField(max_length=64, blank=True)
    event_type = models.CharField(max_length=100, blank=True)
    error_class = models.CharField(max_length=16, choices=ErrorClass.choices)
    error = models.TextField(blank=True)
    delivery_count = models.PositiveIntegerField(default=0)
    payload = models.JSONField(default=dict, help_text="The entry's fields, truncated.")
    failed_at = models.DateTimeField()
    state = models.CharField(max_length=16, choices=DeadLetterState.choices, default=DeadLetterState.OPEN)
    auto_requeues = models.PositiveIntegerField(default=0)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["stream", "group", "message_id"], name="deadletter_origin_unique")
        ]
        indexes = [models.Index(fields=["state", "-failed_at"], name="deadletter_state_time")]

    def __str__(self) -> str:
        return f"{self.stream}/{self.group} {self.message_id}"


class LLMCall(models.Model):
    """One row per model call (or local-analyzer call): what it cost and how it ended."""

    prompt = models.CharField(max_length=64)
    model = models.CharField(max_length=100)
    item = models.ForeignKey(RawItem, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    latency_ms = models.FloatField()
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    reasoning_tokens = models.PositiveIntegerField(default=0)
    outcome = models.CharField(max_length=32)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "LLM call"
        verbose_name_plural = "LLM calls"
        indexes = [
            models.Index(fields=["item", "created_at"], name="llmcall_item_time"),
            models.Index(fields=["prompt", "-created_at"], name="llmcall_prompt_time"),
            models.Index(fields=["created_at"], name="llmcall_time"),  # retention
        ]

    def __str__(self) -> str:
        return f"{self.prompt} via {self.model}: {self.outcome}"


class LLMCallHourly(models.Model):
    """Model calls rolled up per hour, prompt, model and outcome, written as their rows are pruned
    (LLM_CALL_RETENTION_HOURS): the cost history outlives the rows."""

    hour = models.DateTimeField()
    prompt = models.CharField(max_length=64)
    model = models.CharField(max_length=100)
    outcome = models.CharField(max_length=32)
    calls = models.PositiveIntegerField(default=0)
    latency_ms_sum = models.FloatField(default=0.0)
    latency_ms_max = models.FloatField(default=0.0)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    reasoning_tokens = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = "model calls per hour"
        verbose_name_plural = "model calls per hour"
        constraints = [
            models.UniqueConstraint(fields=["hour", "prompt", "model", "outcome"], name="llmcallhourly_bucket")
        ]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} {self.prompt} via {self.model}: {self.calls} {self.outcome}"


class ConsumedEvent(models.Model):
    """Records that a group's handler committed its effects for an event (exactly-once effects)."""

    group = models.CharField(max_length=100)
    event_id = models.CharField(max_length=64)
    consumed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["group", "event_id"], name="consumed_group_event")]
        indexes = [models.Index(fields=["consumed_at"], name="consumed_time")]  # retention

    def __str__(self) -> str:
        return f"{self.group} consumed {self.event_id}"


class AuditEvent(models.Model):
    """cg:audit's append-only copy of every event on stream:item:events (one row per event id)."""

    event_id = models.CharField(max_length=64, unique=True)
    stream = models.CharField(max_length=100)
    message_id = models.CharField(max_length=32)
    event_type = models.CharField(max_length=100)
    subject = models.CharField(max_length=64)
    envelope = models.JSONField()
    recorded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            models.Index(fields=["subject", "recorded_at"], name="audit_subject_time"),
            models.Index(fields=["recorded_at"], name="audit_time"),  # retention
        ]

    def __str__(self) -> str:
        return f"{self.event_type} {self.subject}"


class AnalyzerModelState(models.TextChoices):
    ACTIVE = "active", "active"
    RETIRED = "retired", "retired (was active)"
    REFUSED = "refused", "refused by the evaluation gate"
    CANDIDATE = "candidate", "candidate (not activated)"


class AnalyzerModel(models.Model):
    """A version of the local analyzer's learned gates (pipeline.llm.local.gates), written by `manage.py
    train_analyzer`: its weights, what it learned from, and its figures on the held-out sets. At most one is
    active; with none active, the model shipped in the repository serves (docs/model-layer.md, "Learned gates")."""

    created_at = models.DateTimeField(default=timezone.now, editable=False)
    contract = models.CharField(max_length=32)
    state = models.CharField(max_length=16, choices=AnalyzerModelState.choices, default=AnalyzerModelState.CANDIDATE)
    document = models.JSONField(help_text="The model file: contract, weights of both layers, provenance.")
    metrics = models.JSONField(default=dict, help_text="Figures on the held-out sets.")
    compared_with = models.JSONField(default=dict, help_text="The active model's figures it was compared with.")
    moderator_labels = models.PositiveIntegerField(default=0, help_text="Moderators' decisions it learned from.")
    note = models.TextField(blank=True, help_text="Why it was activated or refused.")
    activated_at = models.DateTimeField(null=True, blank=True)
    activated_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["state"], condition=models.Q(state="active"), name="analyzer_model_one_active"
            ),
        ]
        permissions = [("activate_analyzermodel", "Can activate (or roll back to) an analyzer model")]

    def __str__(self) -> str:
        return f"analyzer model {self.pk} ({self.state})"
