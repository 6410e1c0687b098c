"""The settings the EigenFlux client keeps in sync with the server (its `kv` store), one row per agent."""

from __future__ import annotations

from items.models import Agent, AgentClientSettings

DEFAULT_POLL_INTERVAL = 300
POLL_INTERVAL_RANGE = (10, 86400)
BOOL_FIELDS = (
    "recurring_publish",
    "auto_reply_pm",
    "auto_comment",
    "show_add_friend",
    "official_pm_optout",
    "match_push",
)
TEXT_FIELDS = {"feed_delivery_preference": 2000, "mode": 16, "runtime_name": 64, "runtime_version": 64}
MODES = ("", "plugin", "skill")


def client_settings_for(agent: Agent) -> AgentClientSettings:
    """The agent's settings, or the defaults (unsaved) when it never changed any."""
    return AgentClientSettings.objects.filter(agent=agent).first() or AgentClientSettings(agent=agent)


def client_settings_update(*, agent: Agent, **fields: object) -> AgentClientSettings:
    """Validate and store the given fields; ValueError names the first bad one."""
    for name, value in fields.items():
        if name in BOOL_FIELDS:
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be a boolean")
        elif name == "feed_poll_interval":
            low, high = POLL_INTERVAL_RANGE
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValueError(f"feed_poll_interval must be an integer from {low} to {high} seconds")
        elif name in TEXT_FIELDS:
            if not isinstance(value, str) or len(value) > TEXT_FIELDS[name]:
                raise ValueError(f"{name} must be a string of at most {TEXT_FIELDS[name]} characters")
            if name == "mode" and value not in MODES:
                raise ValueError("mode must be plugin, skill or empty")
        else:
            raise ValueError(f"unknown setting {name}")
    row, _ = AgentClientSettings.objects.get_or_create(agent=agent)
    for name, value in fields.items():
        setattr(row, name, value)
    if fields:
        row.save(update_fields=[*fields, "updated_at"])
    return row
