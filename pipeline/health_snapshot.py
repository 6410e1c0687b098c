"""Selectors for the admin's pipeline pages: the live health snapshot (streams and groups from XINFO, outbox
backlog, open dead letters, throughput, model latency) and the prompts with their validation status."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import redis
from django.conf import settings
from django.db.models import Aggregate, Avg, Count, FloatField, Q, Sum
from django.db.models.functions import TruncMinute
from django.utils import timezone

from eigenflux.base.redis import get_redis
from items.models import ItemStatus, ProcessedItem, RawItem
from items.ranker.serving import ranker_problem
from pipeline.housekeeping import LAG_COUNT_CAP, group_lag, outbox_backlog
from pipeline.llm.reachability import model_degraded
from pipeline.models import DeadLetter, DeadLetterState, LLMCall, LLMCallHourly
from pipeline.runtime import liveness
from pipeline.streams import DLQ_STREAMS, KNOWN_STREAMS

HEALTH_STREAMS = KNOWN_STREAMS + DLQ_STREAMS
LATENCY_WINDOW = timedelta(hours=1)


def can_view_health(user) -> bool:
    """Staff with the dead-letter view permission (the moderators group has it): the page and its socket."""
    return bool(user and user.is_active and user.is_staff and user.has_perm("pipeline.view_deadletter"))


def push_seconds() -> float:
    return settings.ADMIN_HEALTH_PUSH_SECONDS


class Percentile(Aggregate):
    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression, fraction: float, **extra):
        super().__init__(expression, fraction=float(fraction), **extra)


def stream_figures(client: redis.Redis, streams: tuple[str, ...] = HEALTH_STREAMS) -> list[dict]:
    """Per stream: length and, per group, pending, lag, last-delivered id and its consumers with idle time."""
    out = []
    for stream in streams:
        try:
            length = client.xlen(stream)
            groups = client.xinfo_groups(stream) if client.exists(stream) else []
        except redis.ResponseError:
            length, groups = 0, []
        figures: dict[str, Any] = {
            "stream": stream,
            "length": length,
            "exists": bool(groups) or length > 0,
            "groups": [],
        }
        for group in groups:
            lag = group_lag(client, stream, group)
            consumers = client.xinfo_consumers(stream, group["name"])
            figures["groups"].append(
                {
                    "name": group["name"],
                    "pending": group["pending"],
                    "lag": lag,
                    "lag_capped": group.get("lag") is None and lag >= LAG_COUNT_CAP,
                    "last_delivered_id": group["last-delivered-id"],
                    "consumers": [
                        {
                            "name": consumer["name"],
                            "pending": consumer["pending"],
                            "idle_ms": consumer["idle"],
                            "idle": human_duration(consumer["idle"]),
                            "inactive_ms": consumer.get("inactive"),
                        }
                        for consumer in sorted(consumers, key=lambda c: c["idle"])
                    ],
                }
            )
        out.append(figures)
    return out


def human_duration(milliseconds: float) -> str:
    """A duration as a moderator reads it: "850 ms", "3.2 s", "42 s", "4 min", "2.5 h", "3 d"."""
    seconds = milliseconds / 1000
    if seconds < 1:
        return f"{milliseconds:.0f} ms"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 36000:
        return f"{seconds / 3600:.1f} h"
    if seconds < 86400:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} d"


def attach_live_consumers(streams: list[dict], consumers: list[dict]) -> None:
    """Add to each group the run_pipeline consumers reporting alive for it that Redis does not list yet: Redis
    enters a consumer in a group only when it is first handed an entry, so a quiet group (the dead-letter
    archive groups, most of the time) shows no Redis consumer while its reader is alive and waiting."""
    for figures in streams:
        for group in figures["groups"]:
            listed = {consumer["name"] for consumer in group["consumers"]}
            group["waiting"] = sorted(
                c["consumer"]
                for c in consumers
                if c["stream"] == figures["stream"] and c["group"] == group["name"] and c["consumer"] not in listed
            )


def outbox_figures() -> dict:
    backlog, oldest = outbox_backlog()
    return {"backlog": backlog, "oldest_age_seconds": round(oldest, 1)}


def dead_letter_figures() -> dict:
    open_letters = DeadLetter.objects.filter(state=DeadLetterState.OPEN)
    by_origin = list(
        open_letters.values("stream", "group", "error_class").annotate(count=Count("pk")).order_by("stream", "group")
    )
    return {"open": sum(row["count"] for row in by_origin), "by_origin": by_origin}


def throughput_figures(minutes: int | None = None) -> dict:
    """Per minute over the window: items published, and items reaching each terminal status."""
    minutes = minutes or settings.ADMIN_HEALTH_THROUGHPUT_MINUTES
    now = timezone.now()
    start = (now - timedelta(minutes=minutes - 1)).replace(second=0, microsecond=0)
    terminal = (ItemStatus.COMPLETED, ItemStatus.DISCARDED, ItemStatus.FAILED, ItemStatus.REVIEW)
    rows = (
        ProcessedItem.objects.filter(processed_at__gte=start, status__in=terminal)
        .annotate(minute=TruncMinute("processed_at"))
        .values("minute", "status")
        .annotate(count=Count("pk"))
    )
    published = (
        RawItem.objects.filter(created_at__gte=start)
        .annotate(minute=TruncMinute("created_at"))
        .values("minute")
        .annotate(count=Count("pk"))
    )
    series = {start + timedelta(minutes=i): dict.fromkeys(["published", *terminal], 0) for i in range(minutes)}
    for row in rows:
        if row["minute"] in series:
            series[row["minute"]][row["status"]] = row["count"]
    for minute_published in published:
        if minute_published["minute"] in series:
            series[minute_published["minute"]]["published"] = minute_published["count"]
    points: list[dict[str, Any]] = [
        {"minute": minute.strftime("%H:%M"), "finished": sum(counts[s] for s in terminal), **counts}
        for minute, counts in sorted(series.items())
    ]
    processed = sum(p["finished"] for p in points)
    return {
        "minutes": minutes,
        "points": points,
        "processed": processed,
        "published": sum(p["published"] for p in points),
        "per_minute": round(processed / minutes, 2),
        "peak": max((p["finished"] for p in points), default=0),
    }


def model_latency_figures(window: timedelta = LATENCY_WINDOW) -> list[dict]:
    """Per prompt and model over the window: calls, errors, average and p95 latency, tokens."""
    rows = (
        LLMCall.objects.filter(created_at__gte=timezone.now() - window)
        .values("prompt", "model")
        .annotate(
            calls=Count("pk"),
            errors=Count("pk", filter=~Q(outcome="ok")),
            avg_ms=Avg("latency_ms"),
            p95_ms=Percentile("latency_ms", 0.95),
            input_tokens=Sum("input_tokens"),
            output_tokens=Sum("output_tokens"),
            reasoning_tokens=Sum("reasoning_tokens"),
        )
        .order_by("prompt", "model")
    )
    return [{**row, "avg_ms": round(row["avg_ms"] or 0, 1), "p95_ms": round(row["p95_ms"] or 0, 1)} for row in rows]


def consumer_figures(statuses: list[dict[str, Any]]) -> list[dict]:
    """The consumers of the running run_pipeline processes, as they last reported themselves (`statuses`,
    liveness.live_consumers): each loop alive (or dead, or stalled), each circuit breaker's state, the entries
    held."""
    out = []
    for status in statuses:
        stall = status.get("stall_seconds", 30)
        loops = []
        for loop in status.get("loops", []):
            state = "alive"
            if not loop.get("alive"):
                state = "dead"
            elif loop.get("watched") and loop.get("idle_seconds", 0) > stall:
                state = "stalled"
            loops.append({"name": loop.get("name", "?"), "state": state, "errors": loop.get("errors", 0)})
        problems = [f"{loop['name']} {loop['state']}" for loop in loops if loop["state"] != "alive"]
        problems += liveness.stuck_problems(status)
        breakers = {name: state for name, state in (status.get("breakers") or {}).items() if state != "closed"}
        out.append(
            {
                "consumer": status.get("consumer", "?"),
                "stream": status.get("stream", ""),
                "group": status.get("group", ""),
                "host": status.get("host", ""),
                "pid": status.get("pid", ""),
                "healthy": not problems,
                "problems": problems,
                "loop_errors": sum(loop["errors"] for loop in loops),
                "workers": sum(1 for loop in loops if loop["name"].startswith("worker")),
                "open_breakers": breakers,
                "held": status.get("held", 0),
                "running": status.get("running", 0),
                "blocked": status.get("blocked", 0),
                "retrying": status.get("retrying", 0),
            }
        )
    return out


def health_snapshot(client: redis.Redis | None = None) -> dict:
    """Everything the health page shows, JSON-serialisable (pushed over the WebSocket as is)."""
    client = client or get_redis()
    try:
        statuses = liveness.live_consumers(client)  # read once: the consumers and the model's breakers
        streams, consumers, redis_error = stream_figures(client), consumer_figures(statuses), ""
    except redis.RedisError as exc:
        statuses, streams, consumers, redis_error = [], [], [], f"Redis unavailable: {exc}"
    attach_live_consumers(streams, consumers)
    return {
        "generated_at": timezone.now().strftime("%Y-%m-%d %H:%M:%S %Z"),
        "streams": streams,
        "consumers": consumers,
        "unhealthy_consumers": sum(1 for c in consumers if not c["healthy"]),
        "redis_error": redis_error,
        "model_degraded": model_degraded(statuses),
        "ranker_problem": ranker_problem(),
        "outbox": outbox_figures(),
        "dead_letters": dead_letter_figures(),
        "throughput": throughput_figures(),
        "model_latency": model_latency_figures(),
    }


# --- prompts -----------------------------------------------------------------------------------------------


def model_usage_24h() -> dict[str, dict]:
    """Per prompt over the last day: calls, invalid outputs, average latency — from the call rows still kept
    and the hourly roll-up of those already pruned (LLM_CALL_RETENTION_HOURS may be shorter than a day)."""
    since = timezone.now() - timedelta(days=1)
    usage: dict[str, dict] = {}
    rows = (
        LLMCall.objects.filter(created_at__gte=since)
        .values("prompt")
        .annotate(n=Count("pk"), bad=Count("pk", filter=Q(outcome="invalid_output")), ms=Sum("latency_ms"))
    )
    rolled = (
        LLMCallHourly.objects.filter(hour__gte=since.replace(minute=0, second=0, microsecond=0))
        .values("prompt")
        .annotate(n=Sum("calls"), bad=Sum("calls", filter=Q(outcome="invalid_output")), ms=Sum("latency_ms_sum"))
    )
    for row in [*rows, *rolled]:
        total = usage.setdefault(row["prompt"], {"calls": 0, "invalid": 0, "ms": 0.0})
        total["calls"] += row["n"] or 0
        total["invalid"] += row["bad"] or 0
        total["ms"] += row["ms"] or 0.0
    for total in usage.values():
        total["avg_ms"] = total["ms"] / total["calls"] if total["calls"] else 0.0
    return usage


def prompt_statuses() -> list[dict]:
    """Each prompt with its result schema, example output and the start-up check's verdict on it."""
    from pipeline.checks import check_prompts
    from pipeline.llm.prompts import PROMPT_NAMES, PromptError, example_output, prompt_path, prompt_source
    from pipeline.llm.schemas import TASK_SCHEMAS

    errors: dict[str, list[str]] = {}
    for error in check_prompts():
        errors.setdefault(str(error.obj), []).append(f"{error.id}: {error.msg}")
    usage = model_usage_24h()
    out = []
    for name in PROMPT_NAMES:
        schema = TASK_SCHEMAS.get(name)
        try:
            example = json.dumps(example_output(name), indent=2, ensure_ascii=False)
        except PromptError as exc:
            example = f"({exc})"
        try:
            source = prompt_source(name)
        except PromptError as exc:
            source = f"({exc})"
        out.append(
            {
                "name": name,
                "path": str(prompt_path(name)),
                "schema_name": schema.__name__ if schema else "-",
                "schema": json.dumps(schema.model_json_schema(), indent=2) if schema else "",
                "example": example,
                "source": source,
                "errors": errors.get(name, []),
                "valid": not errors.get(name),
                "calls_24h": usage.get(name, {}).get("calls", 0),
                "invalid_24h": usage.get(name, {}).get("invalid", 0),
                "avg_ms_24h": round(usage.get(name, {}).get("avg_ms") or 0, 1),
            }
        )
    return out
