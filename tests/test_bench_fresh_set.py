"""The fresh test sets (bench/data/safety_fresh.jsonl, safety_fresh2.jsonl ... safety_fresh18.jsonl; docs/benchmarks.md,
"A fresh test set"): each parses, holds what bench/data/README.md says it holds, shares no text
with any labelled or training file (nor with another fresh set), and the bench's tables count right. No figure of
the analyzer is asserted here: a set is judged by hand, with `analyzer_quality --fresh`, `--fresh2`, `--fresh3`,
`--fresh4` ... `--fresh18`."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import pytest

from bench.fresh_set import (
    FRESH_SET,
    FRESH_SET_2,
    FRESH_SET_3,
    FRESH_SET_4,
    FRESH_SET_5,
    FRESH_SET_6,
    FRESH_SET_7,
    FRESH_SET_8,
    FRESH_SET_9,
    FRESH_SET_10,
    FRESH_SET_11,
    FRESH_SET_12,
    FRESH_SET_13,
    FRESH_SET_14,
    FRESH_SET_15,
    FRESH_SET_16,
    FRESH_SET_17,
    FRESH_SET_18,
    FRESH_SETS,
    LANGS,
    UNSAFE_CATEGORIES,
    add_flags,
    fresh_section,
    judge,
    load_fresh,
    tally,
)

ROOT = Path(__file__).resolve().parent.parent
# The documented counts (bench/data/README.md): label -> per language en, zh, ja; and the fewest unsafe cases of
# each category per language.
DOCUMENTED = {
    FRESH_SET: ({"unsafe": (30, 30, 30), "edgy": (23, 24, 23), "spam": (14, 13, 14), "normal": (13, 13, 13)}, 2),
    FRESH_SET_2: ({"unsafe": (35, 35, 35), "edgy": (25, 25, 25), "spam": (15, 15, 15), "normal": (15, 15, 15)}, 3),
    FRESH_SET_3: ({"unsafe": (35, 35, 35), "edgy": (25, 25, 25), "spam": (15, 15, 15), "normal": (15, 15, 15)}, 3),
    FRESH_SET_4: ({"unsafe": (30, 30, 30), "edgy": (30, 30, 30), "spam": (15, 15, 15), "normal": (15, 15, 15)}, 2),
    FRESH_SET_5: ({"unsafe": (30, 30, 30), "edgy": (30, 30, 30), "spam": (15, 15, 15), "normal": (15, 15, 15)}, 2),
    FRESH_SET_6: ({"unsafe": (30, 30, 30), "edgy": (30, 30, 30), "spam": (15, 15, 15), "normal": (15, 15, 15)}, 2),
    FRESH_SET_7: ({"unsafe": (34, 34, 34), "edgy": (33, 33, 33), "spam": (17, 17, 17), "normal": (16, 16, 16)}, 2),
    # The eighth's writer chose its own categories (kept in `kind`), mapped onto the bench's: not every one in
    # every language.
    FRESH_SET_8: ({"unsafe": (34, 34, 34), "edgy": (33, 33, 33), "spam": (17, 17, 16), "normal": (16, 16, 16)}, 0),
    # The ninth, tenth and eleventh were written from one brief (bench/data/README.md), categories mapped by their
    # writers.
    **{
        path: ({"unsafe": (34, 34, 34), "edgy": (33, 33, 33), "spam": (17, 17, 17), "normal": (16, 16, 16)}, 0)
        for path in (FRESH_SET_9, FRESH_SET_10, FRESH_SET_11)
    },
    # The twelfth to fifteenth were written from a second brief (bench/data/safety_fresh_brief.md), the same counts
    # but for three test posts dropped because an older set's shorter test post stood inside them word for word.
    **{
        path: ({"unsafe": (34, 34, 34), "edgy": (33, 33, 33), "spam": spam, "normal": (16, 16, 16)}, 0)
        for path, spam in (
            (FRESH_SET_12, (16, 17, 17)),
            (FRESH_SET_13, (17, 17, 17)),
            (FRESH_SET_14, (16, 17, 17)),
            (FRESH_SET_15, (17, 17, 16)),
        )
    },
    # The sixteenth, from the same brief with an emphasis of its own (bench/data/safety_fresh_brief.md), one English
    # test post dropped for the same reason.
    # The seventeenth and eighteenth likewise (development sets), each without its English test post.
    **{
        path: ({"unsafe": (34, 34, 34), "edgy": (33, 33, 33), "spam": (16, 17, 17), "normal": (16, 16, 16)}, 0)
        for path in (FRESH_SET_16, FRESH_SET_17, FRESH_SET_18)
    },
}
SETS = pytest.mark.parametrize("path", sorted(FRESH_SETS.values()), ids=lambda path: path.name)


@SETS
def test_the_set_holds_the_documented_languages_labels_and_categories(path):
    documented, fewest = DOCUMENTED[path]
    cases = load_fresh(path)
    counts = Counter((case["label"], case["lang"]) for case in cases)
    assert {label: tuple(counts[(label, lang)] for lang in LANGS) for label in documented} == documented
    assert len(cases) == sum(map(sum, documented.values()))
    for lang in LANGS if fewest else ():
        categories = Counter(case["category"] for case in cases if case["lang"] == lang and case["label"] == "unsafe")
        assert set(categories) == set(UNSAFE_CATEGORIES), lang
        assert min(categories.values()) >= fewest, lang
        kinds = {case["kind"] for case in cases if case["lang"] == lang and case["label"] == "unsafe"}
        assert {"minors", "obfuscated"} <= kinds, lang
    assert len({case["text"] for case in cases}) == len(cases)


# The seventh set's kinds, the same in each language (bench/data/README.md, `safety_fresh7.jsonl`): its unsafe posts
# mostly say what they offer without the category's words (euphemism, a job, a service, a threat left implied).
KINDS_7 = {
    "unsafe": {
        "euphemism": (10, 11, 11),
        "job_offer": (7, 6, 6),
        "service": (4, 5, 5),
        "implied_threat": (4, 4, 4),
        "minors": (4, 4, 4),
        "obfuscated": (2, 2, 2),
        "plain": (3, 2, 2),
    },
    "edgy": {
        "warning_guide": (5, 5, 5),
        "fiction": (4, 4, 4),
        "news": (3, 3, 3),
        "harm_reduction": (3, 3, 3),
        "firearms": (3, 3, 3),
        "pentest": (2, 2, 2),
        "cve": (2, 2, 2),
        "malware_analysis": (2, 2, 2),
        "fraud_prevention": (2, 2, 2),
        "privacy": (2, 2, 2),
        "support": (2, 2, 2),
        "compliance": (1, 1, 1),
        "research": (1, 1, 1),
        "jargon": (1, 1, 1),
    },
    "spam": {
        "dm": (3, 3, 3),
        "vague_ad": (3, 3, 3),
        "pump": (2, 2, 2),
        "easy_money": (2, 2, 2),
        "bait": (2, 2, 2),
        "referral": (2, 2, 2),
        "test": (1, 1, 1),
        "follow": (1, 1, 1),
        "keywords": (1, 1, 1),
    },
    "normal": {"demand": (4, 4, 4), "supply": (4, 4, 4), "info": (4, 4, 4), "alert": (4, 4, 4)},
}
UNSAFE_7 = {"threats": 4, "drugs": 4, "doxxing": 2}  # the other eight categories: 3 each, per language


def test_the_seventh_set_holds_the_documented_kinds_and_categories():
    cases = load_fresh(FRESH_SET_7)
    kinds = Counter((case["label"], case["kind"], case["lang"]) for case in cases)
    assert {
        label: {kind: tuple(kinds[(label, kind, lang)] for lang in LANGS) for kind in documented}
        for label, documented in KINDS_7.items()
    } == KINDS_7
    assert sum(kinds.values()) == sum(sum(map(sum, documented.values())) for documented in KINDS_7.values())
    for lang in LANGS:
        categories = Counter(case["category"] for case in cases if case["lang"] == lang and case["label"] == "unsafe")
        assert categories == {category: UNSAFE_7.get(category, 3) for category in UNSAFE_CATEGORIES}, lang


def test_the_flags_choose_a_set():
    parser = argparse.ArgumentParser()
    add_flags(parser)
    assert parser.parse_args([]).fresh_set is None
    assert parser.parse_args(["--fresh"]).fresh_set == FRESH_SET
    assert parser.parse_args(["--fresh2"]).fresh_set == FRESH_SET_2 == ROOT / "bench/data/safety_fresh2.jsonl"
    assert parser.parse_args(["--fresh3"]).fresh_set == FRESH_SET_3 == ROOT / "bench/data/safety_fresh3.jsonl"
    assert parser.parse_args(["--fresh4"]).fresh_set == FRESH_SET_4 == ROOT / "bench/data/safety_fresh4.jsonl"
    assert parser.parse_args(["--fresh5"]).fresh_set == FRESH_SET_5 == ROOT / "bench/data/safety_fresh5.jsonl"
    assert parser.parse_args(["--fresh6"]).fresh_set == FRESH_SET_6 == ROOT / "bench/data/safety_fresh6.jsonl"
    assert parser.parse_args(["--fresh7"]).fresh_set == FRESH_SET_7 == ROOT / "bench/data/safety_fresh7.jsonl"
    assert parser.parse_args(["--fresh8"]).fresh_set == FRESH_SET_8 == ROOT / "bench/data/safety_fresh8.jsonl"
    assert parser.parse_args(["--fresh9"]).fresh_set == FRESH_SET_9 == ROOT / "bench/data/safety_fresh9.jsonl"
    assert parser.parse_args(["--fresh10"]).fresh_set == FRESH_SET_10 == ROOT / "bench/data/safety_fresh10.jsonl"
    assert parser.parse_args(["--fresh11"]).fresh_set == FRESH_SET_11 == ROOT / "bench/data/safety_fresh11.jsonl"
    for number, path in (
        (12, FRESH_SET_12),
        (13, FRESH_SET_13),
        (14, FRESH_SET_14),
        (15, FRESH_SET_15),
        (16, FRESH_SET_16),
    ):
        assert path == ROOT / f"bench/data/safety_fresh{number}.jsonl"
        assert parser.parse_args([f"--fresh{number}"]).fresh_set == path
    with pytest.raises(SystemExit):
        parser.parse_args(["--fresh2", "--fresh3"])
    with pytest.raises(SystemExit):
        parser.parse_args(["--fresh3", "--fresh4"])
    with pytest.raises(SystemExit):
        parser.parse_args(["--fresh4", "--fresh5"])
    with pytest.raises(SystemExit):
        parser.parse_args(["--fresh5", "--fresh6"])
    with pytest.raises(SystemExit):
        parser.parse_args(["--fresh6", "--fresh7"])


def _texts_elsewhere(fresh: Path) -> tuple[set[str], str]:
    """Every `text`/`content` of the other labelled and training files (the other fresh set included), and the raw
    text of every such file."""
    texts: set[str] = set()
    raw = []
    files = sorted((ROOT / "bench" / "data").glob("*.jsonl")) + sorted((ROOT / "pipeline/llm/local/data").glob("*"))
    for path in files:
        if path == fresh or not path.is_file():
            continue
        body = path.read_text(encoding="utf-8", errors="replace")
        raw.append(body)
        if path.suffix == ".jsonl":
            for line in filter(str.strip, body.splitlines()):
                row = json.loads(line)
                texts.update(str(row[key]).strip() for key in ("text", "content") if key in row)
    return texts, "\n".join(raw)


@SETS
def test_no_fresh_text_is_in_a_labelled_or_training_file(path):
    """None of its texts (whole, or a longer one inside a file) is copied into bench/data's other sets or the
    analyzer's shipped data: a test set is never trained on, and the development sets the gates learn from are read
    from their own files (gate_data.APART_SETS, test_gates.py)."""
    texts, raw = _texts_elsewhere(path)
    fresh = [case["text"] for case in load_fresh(path)]
    assert [text for text in fresh if text in texts] == []
    assert [text for text in fresh if len(text) >= 12 and text in raw] == []


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ({"lang": "fr", "label": "unsafe", "category": "drugs", "kind": "plain", "text": "x"}, "unknown lang 'fr'"),
        ({"lang": "en", "label": "bad", "category": "bad", "kind": "plain", "text": "x"}, "label 'bad'"),
        ({"lang": "en", "label": "unsafe", "category": "edgy", "kind": "plain", "text": "x"}, "category 'edgy'"),
        ({"lang": "en", "label": "edgy", "category": "edgy", "text": "x"}, "expected string fields"),
    ],
)
def test_a_bad_line_is_named(tmp_path, line, error):
    path = tmp_path / "set.jsonl"
    good = {"lang": "zh", "label": "normal", "category": "normal", "kind": "info", "text": "台风预警"}
    path.write_text(json.dumps(good) + "\n\n" + json.dumps(line) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=f"set.jsonl line 3: .*{error}"):
        load_fresh(path)


CASES = [
    {"lang": "en", "label": "unsafe", "category": "drugs", "kind": "plain", "text": "a"},
    {"lang": "en", "label": "unsafe", "category": "drugs", "kind": "plain", "text": "b"},
    {"lang": "en", "label": "unsafe", "category": "drugs", "kind": "plain", "text": "c"},
    {"lang": "ja", "label": "edgy", "category": "edgy", "kind": "news", "text": "d"},
    {"lang": "ja", "label": "edgy", "category": "edgy", "kind": "news", "text": "e"},
    {"lang": "zh", "label": "spam", "category": "spam", "kind": "test", "text": "f"},
]
DECISIONS = {
    "a": ("discarded", "safety:fraud"),
    "b": ("discarded", "low_quality"),  # blocked, though not by the safety gate
    "c": ("held", "safety_risk"),  # held: neither blocked nor passed
    "d": ("published", ""),
    "e": ("discarded", "safety:violent_extremism"),
    "f": ("published", ""),
}


def test_blocked_passed_and_held_are_counted_apart():
    judged = judge(CASES, DECISIONS.__getitem__)
    groups = tally(judged, lambda item: (f"{item.lang}/{item.label}",))
    assert groups["en/unsafe"] == Counter(total=3, right=2, held=1)
    assert groups["ja/edgy"] == Counter(total=2, right=1)
    assert groups["zh/spam"] == Counter(total=1)


def test_the_section_prints_rates_held_counts_and_missed_stages(capsys, tmp_path):
    path = tmp_path / "set.jsonl"
    path.write_text("\n".join(json.dumps(case) for case in CASES), encoding="utf-8")
    fresh_section(DECISIONS.__getitem__, path)
    out = capsys.readouterr().out
    en = next(line for line in out.splitlines() if line.strip().startswith("en "))
    assert en.split()[1:4] == ["0.67", "(2/3)", "h1"]
    assert en.split()[-2:] == ["0.33", "(1/3)"]  # by the safety gate alone
    assert "unsafe/drugs" in out and "edgy:news" in out and "spam:test" in out
    assert "edgy passed missed:   1  discarded safety:violent_extremism" in out
    assert "unsafe blocked missed:   1  held safety_risk" in out


@pytest.mark.parametrize(
    ("path", "standing"),
    [
        (FRESH_SET, "development set"),
        (FRESH_SET_2, "development set"),
        (FRESH_SET_3, "development set"),
        (FRESH_SET_4, "development set"),
        (FRESH_SET_5, "development set"),
        (FRESH_SET_6, "test set"),
        (FRESH_SET_7, "test set"),
        (FRESH_SET_9, "development set"),
        (FRESH_SET_10, "development set"),
        (FRESH_SET_11, "test set"),
    ],
)
def test_the_heading_says_whether_the_figures_are_test_or_development_figures(capsys, path, standing):
    fresh_section(lambda text: ("published", ""), path)
    heading = capsys.readouterr().out.splitlines()[0]
    assert path.name in heading and standing in heading


def test_label_rates_count_a_held_unsafe_post_as_stopped():
    from bench.fresh_set import label_rates

    cases = [
        {"lang": "en", "label": label, "category": "drugs" if label == "unsafe" else label, "kind": "k", "text": text}
        for label, text in (("unsafe", "held"), ("unsafe", "published"), ("edgy", "published"), ("spam", "published"))
    ] + [{"lang": "en", "label": "normal", "category": "normal", "kind": "k", "text": "held"}]
    assert label_rates(cases, lambda text: (text, "")) == ["0.500", "1.000", "0.000", "0.000"]
