"""`make typecheck` (part of `make lint`): mypy with django-stubs passes, and it needs no database: the settings
it imports must not start the embedded PostgreSQL or Redis (it works on a fresh clone with nothing running)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_mypy_is_clean_and_starts_no_server(tmp_path):
    data_dir = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY")}
    env["EIGENFLUX_DATA_DIR"] = str(data_dir)  # where embedded servers would appear if the settings started them
    result = subprocess.run(["make", "typecheck"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "Success: no issues found" in result.stdout
    assert not (data_dir / "pg").exists() and not (data_dir / "redis").exists(), "mypy must not start a server"
