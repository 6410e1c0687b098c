"""Imports point down the layers (docs/architecture.md): the base (eigenflux/base/, and the settings built on it)
imports no app and none of the project wiring above it. Every import counts, a function's lazy one too."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def upward_imports(paths: list[Path], allowed_prefixes: tuple[str, ...], project: tuple[str, ...]) -> list[str]:
    """`path: module` for each import of a project module outside the allowed ones."""
    found = []
    for path in paths:
        for name in imported_modules(path):
            top = name.split(".")[0]
            if top in project and not name.startswith(allowed_prefixes):
                found.append(f"{path.relative_to(ROOT)}: {name}")
    return found


PROJECT = ("eigenflux", "items", "pipeline")


def test_the_base_imports_no_app_and_no_wiring():
    base = [*sorted((ROOT / "eigenflux" / "base").rglob("*.py")), ROOT / "eigenflux" / "settings.py"]
    assert len(base) > 10
    # `from eigenflux import base` would be the package itself; everything else of eigenflux sits above.
    assert upward_imports(base, ("eigenflux.base",), PROJECT) == []


def test_the_check_sees_an_upward_import(tmp_path, monkeypatch):
    module = ROOT / "eigenflux" / "base" / "redis.py"
    offending = tmp_path / "offending.py"
    offending.write_text(module.read_text(encoding="utf-8") + "\n\ndef late():\n    from items.models import Agent\n")
    monkeypatch.setattr("tests.test_layer_boundaries.ROOT", tmp_path)
    assert upward_imports([offending], ("eigenflux.base",), PROJECT) == [
        "offending.py: items.models",
        "offending.py: items.models.Agent",
    ]


def test_the_stream_engine_imports_nothing_of_the_application():
    """pipeline/runtime is a library: consumers, services (relay, housekeeping), the exactly-once table and
    dependency probes are handed to it by the application (run_pipeline, pipeline.apps)."""
    engine = sorted((ROOT / "pipeline" / "runtime").rglob("*.py"))
    assert len(engine) > 20
    assert upward_imports(engine, ("eigenflux.base", "pipeline.runtime"), PROJECT) == []
