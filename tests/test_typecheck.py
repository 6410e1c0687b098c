"""`make typecheck` (part of `make lint`, which `make test` runs first) needs no database: the settings django-stubs
imports, under the environment the Makefile gives mypy, must not start the embedded PostgreSQL or Redis, so that
it works on a fresh clone with nothing running. mypy itself runs once per `make test`, in `make lint`; this test
checks the environment that run relies on, without running mypy a second time."""

from __future__ import annotations

import itertools
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def typecheck_environment() -> dict[str, str]:
    """The VAR=value assignments in front of mypy in `make typecheck`, as make would run them."""
    dry_run = subprocess.run(["make", "-n", "typecheck"], cwd=ROOT, capture_output=True, text=True, check=True)
    joined = dry_run.stdout.replace("\\\n", " ")  # make echoes the recipe's continuation lines as written
    words = shlex.split(next(line for line in joined.splitlines() if "mypy" in line))
    assignments = itertools.takewhile(lambda word: "=" in word, words)  # VAR=value words, up to the command
    return dict(word.split("=", 1) for word in assignments)


@pytest.mark.slow
def test_the_settings_mypy_imports_start_no_server(tmp_path):
    placeholders = typecheck_environment()
    assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY"} <= placeholders.keys(), placeholders
    data_dir = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY")}
    env |= placeholders | {"EIGENFLUX_DATA_DIR": str(data_dir), "DJANGO_SETTINGS_MODULE": "eigenflux.settings"}
    # What django-stubs' plugin does: import the settings and set Django up (apps loaded, nothing connected).
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); print('ok')"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert not (data_dir / "pg").exists() and not (data_dir / "redis").exists(), (
        "mypy's settings must not start a server"
    )
