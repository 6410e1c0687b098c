"""`make bench` runs the benchmarks and nothing else: every module of bench/ is listed once, as a benchmark, a tool
or a support module (bench/__init__.py); `python -m bench` runs exactly the benchmarks; each benchmark prints its
whole docstring on `--help` and exits cleanly."""

from __future__ import annotations

import ast
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import bench
from bench.__main__ import main as run_benchmarks

ROOT = Path(__file__).resolve().parent.parent
MODULES = sorted(path.stem for path in (ROOT / "bench").glob("*.py") if path.stem not in ("__init__", "__main__"))


def test_every_module_of_bench_is_a_benchmark_a_tool_or_support_once():
    listed = [*bench.BENCHMARKS, *bench.TOOLS, *bench.SUPPORT]
    assert sorted(listed) == MODULES  # a new module needs a decision; none is listed twice


@pytest.mark.parametrize("name", bench.BENCHMARKS)
def test_a_benchmark_is_a_script_with_a_help(name: str):
    tree = ast.parse((ROOT / "bench" / f"{name}.py").read_text(encoding="utf-8"))
    assert ast.get_docstring(tree), "a benchmark says what it measures and how to run it"
    guards = [node for node in tree.body if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)]
    assert guards, "run as a script"


def test_python_m_bench_runs_the_benchmarks_and_nothing_else(monkeypatch, capsys):
    ran: list[str] = []
    monkeypatch.setattr("bench.__main__.subprocess.call", lambda argv: ran.append(Path(argv[-1]).stem) or 0)
    assert run_benchmarks([]) == 0
    assert ran == list(bench.BENCHMARKS)
    ran.clear()
    assert run_benchmarks(["match_push"]) == 0 and ran == ["match_push"]
    assert run_benchmarks(["scratch"]) == 2 and ran == ["match_push"]
    assert "not a benchmark: scratch" in capsys.readouterr().err
    makefile = (ROOT / "Makefile").read_text()
    [recipe] = [line for line in makefile.splitlines() if "python -m bench" in line]
    assert recipe.strip() == "$(BIN)/python -m bench $(BENCH)"


def _help(name: str) -> tuple[str, subprocess.CompletedProcess]:
    script = ROOT / "bench" / f"{name}.py"
    return name, subprocess.run(
        [sys.executable, str(script), "--help"], cwd=ROOT, capture_output=True, text=True, timeout=180
    )


@pytest.mark.slow
def test_every_benchmark_prints_its_whole_docstring_on_help():
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(_help, bench.BENCHMARKS))
    for name, result in results:
        assert result.returncode == 0, (name, result.stderr[-2000:])
        doc = ast.get_docstring(ast.parse((ROOT / "bench" / f"{name}.py").read_text(encoding="utf-8")), clean=False)
        assert result.stdout.startswith("usage: "), name
        assert doc is not None and doc.strip() in result.stdout, f"{name}: --help cuts its docstring"
