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


# The bench modules the tests import. Importing one must leave the environment alone: the tests hand os.environ on
# to the pipeline processes they start, and a LOG_LEVEL set by an import silenced those processes' INFO lines (the
# slow tier's log, shutdown and outage tests failed whenever a module importing bench.review_queue was collected).
IMPORTED_BY_TESTS = ("bench.review_queue", "bench.fresh_set", "bench.safety_set", "bench.pipeline_local")


@pytest.mark.slow
def test_importing_a_bench_module_leaves_the_environment_alone():
    import json
    import os
    import subprocess
    import sys

    code = (
        "import json, os, sys\n"
        "before = dict(os.environ)\n"
        f"for name in {IMPORTED_BY_TESTS!r}:\n"
        "    __import__(name)\n"
        "changed = sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k))\n"
        "print(json.dumps(changed))\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "LOG_LEVEL"}
    env["DJANGO_SETTINGS_MODULE"] = "eigenflux.settings"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
