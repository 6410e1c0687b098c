"""Every relative link in README.md and docs/*.md resolves: the file (or folder) exists and, for a `#fragment`,
the target page has a heading with that anchor (GitHub's rule: lower case, punctuation dropped, spaces as
hyphens, a repeated heading numbered -1, -2, ...). Links inside code are not links. The README's documentation
index lists every page of docs/."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto: ...


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks, with inline code spans blanked."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(INLINE_CODE.sub("", line))
    return lines


def slug(heading: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading counts by its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in page.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[str]:
    return [target for line in prose_lines(page.read_text()) for target in LINK.findall(line)]


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in links(page):
        if EXTERNAL.match(target):
            continue
        path_part, _, fragment = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            broken.append(f"{target}: no such file or folder ({os.path.relpath(resolved, REPO)})")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            broken.append(f"{target}: {os.path.relpath(resolved, REPO)} has no heading with the anchor #{fragment}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path):
    assert broken_links(page) == []


def test_the_checker_finds_a_broken_file_and_a_broken_anchor(tmp_path: Path):
    (tmp_path / "other.md").write_text("# Other page\n\n## A `code` heading: with punctuation\n\n## Twice\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md) [ok](other.md#a-code-heading-with-punctuation) [ok](other.md#twice-1) [ok](#here)\n"
        "[gone](missing.md) [bad anchor](other.md#nowhere) ![gone too](img/missing.png) [web](https://x.invalid/)\n"
        "`[in code](also-missing.md)`\n\n```\n[in a fence](missing-too.md)\n# not a heading\n```\n\n## Here\n"
    )
    broken = broken_links(page)
    assert [entry.split(":")[0] for entry in broken] == ["missing.md", "other.md#nowhere", "img/missing.png"]
    assert "not-a-heading" not in anchors(page)


def test_the_readme_links_every_page_of_docs():
    linked = {(REPO / target.partition("#")[0]).resolve() for target in links(REPO / "README.md")}
    assert [page.name for page in sorted(DOCS.glob("*.md")) if page.resolve() not in linked] == []
