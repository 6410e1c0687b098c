"""tests/conftest.py stops a run whose collection changed the process environment (docs/development.md): a module
that sets os.environ at import would reach every process a later test starts."""

from __future__ import annotations

import os

import pytest

from tests import conftest


def test_a_changed_environment_stops_the_run_naming_the_variable(monkeypatch):
    # The environment as this test finds it (earlier tests may have set variables at run time, e.g. the embedding
    # engine's thread count: only collection is guarded).
    monkeypatch.setattr(conftest, "_ENVIRONMENT", dict(os.environ))
    conftest.pytest_collection_finish(None)  # unchanged
    monkeypatch.setenv("LLM_PROVIDER", "changed-by-an-import")
    with pytest.raises(pytest.UsageError, match="LLM_PROVIDER"):
        conftest.pytest_collection_finish(None)
