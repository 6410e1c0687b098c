"""Every project module a bench script imports exists: the benchmarks are run by hand, so a module moved or
renamed must not leave one of them failing at its first line."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ("bench", "eigenflux", "items", "pipeline", "tests")
SCRIPTS = sorted((ROOT / "bench").rglob("*.py"))


def missing_imports(path: Path) -> list[str]:
    missing = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        for module in modules:
            if module.split(".")[0] in PROJECT and importlib.util.find_spec(module) is None:
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno}: {module}")
    return missing


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_project_module_a_bench_script_imports_exists(path):
    assert missing_imports(path) == []


def test_a_moved_module_is_reported(tmp_path, monkeypatch):
    script = tmp_path / "bench_x.py"
    script.write_text("from eigenflux.moved_away import get_redis\nfrom eigenflux.base.redis import get_redis\n")
    monkeypatch.setattr("tests.test_bench_imports.ROOT", tmp_path)
    assert missing_imports(script) == ["bench_x.py:1: eigenflux.moved_away"]
