"""tests/conftest.py stops a run whose collection changed the process environment (docs/development.md): a module
that sets os.environ at import would reach every process a later test starts."""

from __future__ import annotations

import pytest

from tests import conftest


def test_a_changed_environment_stops_the_run_naming_the_variable(monkeypatch):
    monkeypatch.delenv("PYTEST_CURRENT_TEST")  # pytest's own, set while a test runs (not at collection)
    conftest.pytest_collection_finish(None)  # as collected: unchanged
    monkeypatch.setenv("LLM_PROVIDER", "changed-by-an-import")
    with pytest.raises(pytest.UsageError, match="LLM_PROVIDER"):
        conftest.pytest_collection_finish(None)
