"""The learned type layer of the local analyzer (pipeline.llm.local.type_classifier): posts that say what they
are without any cue word get their type, in every language. None of these texts is in any data file."""

from __future__ import annotations

import json

import pytest

from bench.content_sets import TYPE_FILE as TRAINING_FILE
from bench.content_sets import lines, type_cases
from pipeline.llm import local
from pipeline.llm.local import type_classifier

# Each was read as info by the cue words alone (no cue matches).
UNCUED = [
    ("supply", "I repair mechanical keyboards, send yours and get it back in a week."),
    ("demand", "公司缺一个懂税务的顾问，长期合作。"),
    ("supply", "本工作室接各类3D建模，游戏和工业都可以。"),
    ("demand", "うちのチームにPythonが書ける人があと一人必要です。"),
    ("supply", "余っているGPUを研究目的なら無償でお貸しします。"),
    ("supply", "中国語の通訳、当日でも対応できます。"),
]


@pytest.mark.parametrize(("kind", "text"), UNCUED)
def test_a_post_without_cue_words_gets_its_type_from_the_model(kind, text):
    assert local.extract(content=text).broadcast_type == kind


def test_probabilities_are_shares_and_the_model_is_deterministic():
    cases = [json.loads(line) for line in TRAINING_FILE.read_text(encoding="utf-8").splitlines()]
    first, second = type_classifier.train(cases[::2]), type_classifier.train(cases[::2])
    shares = first.probabilities(UNCUED[0][1])
    assert shares == second.probabilities(UNCUED[0][1])
    assert abs(sum(shares.values()) - 1.0) < 1e-9
    # On the half it did not train on, the model's top type is right far more often than chance (0.25).
    held = cases[1::2]
    right = sum(max(probs := first.probabilities(case["text"]), key=probs.__getitem__) == case["type"] for case in held)
    assert right / len(held) > 0.6


def test_the_shipped_training_file_is_current_and_holds_no_held_out_case():
    assert TRAINING_FILE.read_text(encoding="utf-8") == lines(type_cases())
    trained = {json.loads(line)["text"] for line in lines(type_cases()).splitlines()}
    assert not trained & {text for _, text in UNCUED}
    from bench.content_sets import TYPE_SET, load_cases
    from bench.safety_set import split_of

    assert all(split_of(case["text"]) == "tuning" for case in load_cases(TYPE_SET) if case["text"] in trained)
