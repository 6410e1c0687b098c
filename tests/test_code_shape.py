"""The code stays in pieces a reader can hold: every module under 400 lines and every function under 60, or
a one-line reason below (docs/development.md). A new long module or function fails here until it is split or
given its reason; a reason whose module or function got short again fails too, so the list stays true."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("eigenflux", "items", "pipeline", "bench", "tests")
MODULE_LINES = 400
FUNCTION_LINES = 60

LONG_MODULES = {
    "eigenflux/settings.py": "every setting in one module, one commented section per subsystem: one place to look",
    "items/models.py": "the items app's whole data model; its models refer to one another and Django expects them here",
    "tests/admin/test_item_actions.py": "every moderation action on items, each with its permission check",
    "tests/deploy/test_files.py": "every deploy file (compose, Kubernetes, alerts) checked against the settings",
    "tests/fakes/openai_server.py": "the fake model server: scripts, faults and every endpoint the SDK calls",
    "tests/pipeline/llm/test_clients.py": "both client kinds (chat and responses) against the same faults",
}
LONG_FUNCTIONS = {
    "bench/load.py::main": "a benchmark script's main, read top to bottom: start, load, measure, print",
    "bench/outbox_wakeup.py::latency_part": "one timed publish loop per mode, with its relay thread, read in order",
    "bench/outbox_wakeup.py::main": "a benchmark script's main, read top to bottom: modes, alternating rounds, tables",
    "bench/outages.py::main": "the outage scenario in order: start, cut Redis and PostgreSQL, restore, verify",
    "bench/search_latency.py::seed": "one COPY of three tables, row layout kept side by side with the columns",
    "bench/search_quality.py::main": "a benchmark script's main, read top to bottom: load, query, table",
    "bench/soak.py::main": "the soak scenario in order: start, publish, kill, settle, verify",
    "tests/deploy/test_metrics_exported.py::test_every_metric_named_in_deploy_is_exported": (
        "starts every process kind once and reads each one's metrics"
    ),
    "tests/e2e/browser_check.py::seed": "the data the headless-browser walk-through looks at, created in one place",
    "tests/e2e/browser_check.py::main": "the headless-browser walk-through of the admin, page after page",
    "tests/pipeline/runtime/test_tracing.py::test_one_trace_from_the_publish_request_to_the_downstream_consumers": (
        "one trace followed from the publish request through every consumer"
    ),
}


def _modules():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")


def _measure() -> tuple[dict[str, int], dict[str, int]]:
    modules, functions = {}, {}
    for name, text in _modules():
        modules[name] = text.count("\n")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                functions[f"{name}::{node.name}"] = max(length, functions.get(f"{name}::{node.name}", 0))
    return modules, functions


def test_modules_and_functions_are_short_or_say_why():
    modules, functions = _measure()
    long_modules = {name for name, lines in modules.items() if lines > MODULE_LINES}
    long_functions = {name for name, lines in functions.items() if lines > FUNCTION_LINES}
    assert sorted(long_modules - set(LONG_MODULES)) == [], "split these modules or give a reason in LONG_MODULES"
    assert sorted(long_functions - set(LONG_FUNCTIONS)) == [], "split these functions or give a reason"
    assert sorted(set(LONG_MODULES) - long_modules) == [], "no longer long: remove their reasons"
    assert sorted(set(LONG_FUNCTIONS) - long_functions) == [], "no longer long: remove their reasons"
