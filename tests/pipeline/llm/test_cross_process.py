"""The fake server serves other processes too: a `manage.py` subprocess configured only through the
environment from `fake_llm.env()` reaches it (this is how run_pipeline tests use it)."""

from __future__ import annotations

import os
import subprocess
import sys
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings as django_settings
from django.db import connection

from pipeline.models import LLMCall
from tests.fakes.fixtures import SAFETY_KEY, SAFETY_MODEL

pytestmark = pytest.mark.slow  # starts a Python process


@pytest.mark.django_db(transaction=True)
def test_subprocess_reaches_the_fake_server_through_env(fake_llm, settings):
    database_url = urlunsplit(urlsplit(settings.DATABASE_URL)._replace(path=f"/{connection.settings_dict['NAME']}"))
    env = {**os.environ, **fake_llm.env(), "DATABASE_URL": database_url, "REDIS_URL": settings.REDIS_URL}
    code = "from pipeline.llm import safety_check; print(safety_check(content='hello', item_id=None).model)"
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=django_settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == SAFETY_MODEL
    (request,) = fake_llm.requests_for("safety")
    assert request.authorization == f"Bearer {SAFETY_KEY}"
    assert LLMCall.objects.filter(prompt="safety", model=SAFETY_MODEL, outcome="ok").count() == 1
