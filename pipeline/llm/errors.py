"""The few ways a model call can fail, as the pipeline sees them (it decides retry vs dead-letter)."""

from __future__ import annotations

# The name the stream engine's breakers know the model endpoint by (registered with its probe in pipeline.apps).
MODEL = "model"


class ModelError(Exception):
    """Base class for every model-layer failure."""


class ModelUnavailable(ModelError):
    """Transport failure, timeout, 429 or 5xx that outlived the per-call retries: transient."""

    dependency = MODEL  # pipeline.runtime.dependencies.dependency_of: the model endpoint's breaker counts it


class ModelOutputInvalid(ModelError):
    """The reply is not exactly one JSON object valid for the task's schema. Not retried inside the call."""


class ModelRequestRejected(ModelError):
    """The server refused the request itself (400/401/403/404/422): configuration or request bug, not transient."""


class CallCancelled(ModelError):
    """The caller's cancel event fired (e.g. lease lost): no further calls were made."""
