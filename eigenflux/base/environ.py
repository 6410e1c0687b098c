"""Typed readers for environment variables; each raises ImproperlyConfigured naming the bad variable."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false, yes/no), got {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {value}")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None, maximum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise ImproperlyConfigured(f"{name} must be a finite number, got {raw!r}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ImproperlyConfigured(f"{name} must be within [{minimum}, {maximum}], got {value}")
    return value


def env_optional_float(name: str, *, minimum: float | None = None, maximum: float | None = None) -> float | None:
    """A number, or None when the variable is unset or empty (the caller then picks a default at run time)."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    return env_float(name, 0.0, minimum=minimum, maximum=maximum)


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [part.strip() for part in raw.split(",") if part.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name, default).strip().lower() or default
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def env_path(name: str, default: Path) -> Path:
    raw = os.environ.get(name)
    return Path(raw).expanduser().resolve() if raw else default


def env_header_value(name: str) -> tuple[str, str] | None:
    """A request header and the value that marks a secure request, written `Header-Name: value`
    (e.g. `X-Forwarded-Proto: https`), as Django's WSGI META key and value; None when unset."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    header, sep, value = raw.partition(":")
    header, value = header.strip(), value.strip()
    if not sep or not header or not value or any(ch.isspace() for ch in header):
        raise ImproperlyConfigured(f"{name} must look like 'X-Forwarded-Proto: https', got {raw!r}")
    return "HTTP_" + header.upper().replace("-", "_"), value


_PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(?:/[A-Za-z0-9][A-Za-z0-9._-]*)*")
_RESERVED_PREFIXES = ("api", "admin", "static", "ws", "metrics", "healthz", "readyz")


def compat_prefix(name: str, default: str) -> str:
    """A URL path prefix without surrounding slashes ("" = off), not shadowing the project's own paths."""
    raw = os.environ.get(name)
    value = (default if raw is None else raw).strip().strip("/")
    if not value:
        return ""
    if not _PREFIX.fullmatch(value) or value.split("/", 1)[0].lower() in _RESERVED_PREFIXES:
        raise ImproperlyConfigured(
            f"{name} must be path segments of letters, digits, '.', '_' or '-' (not starting with "
            f"{', '.join(_RESERVED_PREFIXES)}), or empty to turn it off; got {raw!r}"
        )
    return value


def settings_or_exit(program: str) -> None:
    """Load the settings now; when one of them is invalid, stop `program` with one line naming the variable and its
    value (exit status 1). A bad setting is the operator's to fix, not a bug: a traceback of Django loading the
    settings would only push the message off the screen. For entry points (manage.py; `make run` could too)."""
    import sys

    from django.conf import settings

    try:
        settings.INSTALLED_APPS  # noqa: B018 - loading eigenflux/settings.py reads and checks the environment
    except ImproperlyConfigured as exc:
        sys.exit(f"{program}: invalid configuration: {exc}")
