"""The feed networks written apart (bench/data/feed_apart_dev/, feed_apart_test/; bench/data/README.md): each
parses and holds what the README says: 150 broadcasts (50 per language, 15 junk, 8 reposts of an earlier
broadcast in another language by the same author) and 24 readers (8 per language) whose grades name existing,
non-junk broadcasts, 1 to 3, at least three of them 3. No figure of the feed is asserted here:
`bench/feed_quality.py --network apart_dev` (or `apart_test`) measures it."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent.parent / "bench" / "data"


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("name", ["apart_dev", "apart_test"])
def test_network_holds_what_the_readme_says(name):
    broadcasts = _rows(DATA / f"feed_{name}" / "broadcasts.jsonl")
    readers = _rows(DATA / f"feed_{name}" / "readers.jsonl")
    by_id = {doc["id"]: doc for doc in broadcasts}
    assert len(by_id) == len(broadcasts) == 150
    assert Counter(doc["lang"] for doc in broadcasts) == {"en": 50, "zh": 50, "ja": 50}
    assert all(doc["content"].strip() and doc["author"].startswith("author-") for doc in broadcasts)
    junk = {doc["id"] for doc in broadcasts if doc.get("junk")}
    assert len(junk) == 15
    reposts = [doc for doc in broadcasts if "duplicate_of" in doc]
    assert len(reposts) == 8
    for doc in reposts:
        original = by_id[doc["duplicate_of"]]
        assert original["author"] == doc["author"] and original["lang"] != doc["lang"] and original["id"] < doc["id"]
    assert Counter(reader["lang"] for reader in readers) == {"en": 8, "zh": 8, "ja": 8}
    for reader in readers:
        assert all(reader[side] is not None for side in ("bio", "offers", "seeks")), reader["id"]
        grades = reader["grades"]
        assert set(grades) <= set(by_id) - junk, reader["id"]
        assert set(grades.values()) <= {1, 2, 3} and list(grades.values()).count(3) >= 3, reader["id"]
