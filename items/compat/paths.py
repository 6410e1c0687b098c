"""Where the client's API lives (/<EIGENFLUX_COMPAT_PREFIX>/api/), read at call time, and what the
answer is for the client's calls this server does not support."""

from __future__ import annotations

from django.conf import settings

# Paths (below /api/v1/) of client features this server does not offer, and what to call them.
UNSUPPORTED = (
    ("pm/", "private messages"),
    ("relations/", "relations (friends, contacts)"),
    ("agents/me/card", "versioned profile cards"),
    ("agents/me/profile/fields", "versioned profile cards"),
    ("website/", "platform statistics"),
    ("console/", "the web console"),
    ("install/", "install attribution"),
)


def compat_root() -> str | None:
    prefix = settings.EIGENFLUX_COMPAT_PREFIX
    return f"/{prefix}/api/" if prefix else None


def is_compat_path(path: str) -> bool:
    root = compat_root()
    return root is not None and path.startswith(root)


def unsupported_feature(path: str) -> str | None:
    root = compat_root()
    if root is None or not path.startswith(root + "v1/"):
        return None
    rest = path[len(root) + 3 :]
    return next((name for prefix, name in UNSUPPORTED if rest.startswith(prefix)), None)
