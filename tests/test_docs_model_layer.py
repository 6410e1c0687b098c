"""docs/model-layer.md describes the model layer's design in at most 300 lines; the dated history of its tuning
passes is kept, as evidence, in docs/benchmarks.md; every command of its "what it measures now" table names a
bench script that exists."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DESIGN = (REPO / "docs" / "model-layer.md").read_text()
BENCHMARKS = (REPO / "docs" / "benchmarks.md").read_text()


def test_the_design_page_stays_a_design_page():
    assert len(DESIGN.splitlines()) <= 300
    assert "### A seventh pass" not in DESIGN  # the diary of passes lives in benchmarks.md


def test_the_tuning_history_is_in_benchmarks_with_its_dates():
    history = BENCHMARKS[BENCHMARKS.index("## The offline analyzer, measured history") :]
    for heading in ("### Local safety", "### A fresh test set", "### The seventh passes merged", "### Trained once"):
        assert heading in history
    assert "3 December 2026" in history and "4 December" in history


def test_every_current_figure_names_a_script_that_exists():
    section = DESIGN[DESIGN.index("## How it is tested, and what it measures now") :]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`.venv/bin/python" in line]
    assert len(rows) >= 4
    for row in rows:
        command = re.search(r"`\.venv/bin/python (-m bench\.(\w+)|bench/(\w+)\.py)", row)
        assert command, row
        module = command.group(2) or command.group(3)
        assert (REPO / "bench" / f"{module}.py").exists(), row
