"""Every environment variable the application reads is documented in docs/configuration.md: the names passed to
the typed readers of eigenflux/base/environ.py (`env_int("NAME", ...)` and the others), `os.environ.get` and
`os.getenv`, anywhere in eigenflux/, items/ and pipeline/."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("eigenflux", "items", "pipeline")
NAME = re.compile(r"[A-Z][A-Z0-9_]*")


def _reads_environment(call: ast.Call) -> bool:
    func = ast.unparse(call.func)
    return func.startswith("env_") or func in ("os.environ.get", "os.getenv", "environ.env_str")


def variables_read(source: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args and _reads_environment(node):
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and NAME.fullmatch(first.value):
                names.add(first.value)
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and NAME.fullmatch(key.value):
                names.add(key.value)
    return names


def application_variables() -> set[str]:
    names: set[str] = set()
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            if "migrations" not in path.parts:
                names |= variables_read(path.read_text())
    return names


def test_the_scanner_finds_each_way_of_reading_a_variable():
    source = (
        'A = env_int("ONE", 1)\nB = os.environ.get("TWO", "")\nC = os.getenv("THREE")\nD = os.environ["FOUR"]\n'
        'E = env_str(name)\nF = request.META.get("CONTENT_LENGTH")\n'
    )
    assert variables_read(source) == {"ONE", "TWO", "THREE", "FOUR"}


def test_every_variable_the_application_reads_is_in_docs_configuration():
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]*)`", (REPO / "docs" / "configuration.md").read_text()))
    read = application_variables()
    assert len(read) > 100  # the scan found the settings
    assert sorted(read - documented) == []
