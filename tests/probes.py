"""Running a snippet in a fresh Python process (Django's settings module set, the repository as working
directory) and reading back the JSON object it prints last: for what only a new process shows (what loading
the application does)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def python_probe(code: str, env: dict[str, str]) -> dict:
    """Run `code` with `env` (plus DJANGO_SETTINGS_MODULE); the JSON object on its last stdout line."""
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**env, "DJANGO_SETTINGS_MODULE": "eigenflux.settings"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])
