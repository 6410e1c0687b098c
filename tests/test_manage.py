"""An invalid setting stops `manage.py` with one clear line naming the variable and its value, and a non-zero
exit status: no traceback of Django loading the settings in front of it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("PIPELINE_CONCURRENCY", "abc", "PIPELINE_CONCURRENCY must be an integer, got 'abc'"),
        ("PIPELINE_CONCURRENCY", "0", "PIPELINE_CONCURRENCY must be >= 1, got 0"),
        ("DEBUG", "maybe", "DEBUG must be a boolean"),
    ],
)
def test_an_invalid_setting_prints_one_line_and_fails(name: str, value: str, says: str):
    env = {
        **os.environ,
        # Placeholders: nothing connects (the settings fail first), and no embedded server is started.
        "DATABASE_URL": "postgresql://check@127.0.0.1:1/check",
        "REDIS_URL": "redis://127.0.0.1:1/0",
        "SECRET_KEY": "check-only",
        name: value,
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    assert result.stdout == ""
    [line] = result.stderr.strip().splitlines()  # one line: no traceback before it
    assert line.startswith("manage.py: invalid configuration: ") and says in line, line


@pytest.mark.slow
def test_make_run_says_the_same_in_one_line_and_starts_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    env |= {"EIGENFLUX_DATA_DIR": str(tmp_path / "data"), "PIPELINE_CONCURRENCY": "abc", "PORT": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "eigenflux.devstack"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line == "make run: invalid configuration: PIPELINE_CONCURRENCY must be an integer, got 'abc'"
    assert "EigenFlux is starting" not in result.stdout
