"""Prometheus metrics for model calls (docs/operations.md#metrics): latency, tokens and outcome per prompt and model."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

CALLS = Counter(
    "eigenflux_llm_calls_total",
    "Model call attempts (local analyzer included, as model 'local') by outcome.",
    ["prompt", "model", "outcome"],
)
LATENCY = Histogram(
    "eigenflux_llm_call_seconds",
    "Model call attempt latency.",
    ["prompt", "model"],
    buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
)
TOKENS = Counter(
    "eigenflux_llm_tokens_total",
    "Tokens used by model calls, by kind (input, output, reasoning).",
    ["prompt", "model", "kind"],
)
