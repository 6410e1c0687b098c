"""Spam bait that the learned safety layers block with no category word of the rules (docs/benchmarks.md, "Spam
bait blocked by the learned layers is named fraud"): the block stands, under the fraud flag (a scam's), not the
category the layers find nearest (malware for "make money fast, click here"); with a category word, the category's
flag stands."""

from __future__ import annotations

import pytest

from pipeline.llm import local
from pipeline.llm.local.safety import _learned_flags

BAIT_ONLY = [
    "BUY NOW!!! Limited time offer, make money fast from home, click here http://a.example http://b.example",
    "Like and share this post and follow for follow! Huge discount on crypto signals, 100x gain guaranteed, join now",
]


@pytest.mark.parametrize("text", BAIT_ONLY)
def test_bait_blocked_on_the_learned_layers_alone_is_named_fraud_not_malware(text):
    """The learned gate (gates.py) leaves these to the spam gate, which discards them; a learned block of bait with
    no category word is named fraud whatever category is nearest."""
    verdict = local.safety_verdict(content=text)
    assert verdict.safe or verdict.flag == "fraud", verdict
    assert local.extract(content=text).discard
    assert _learned_flags([], "malware", text) == ["fraud"]


def test_a_category_word_keeps_its_own_flag():
    text = "Selling ransomware builds to affiliates, 70/30 split, DM me now, limited offer, click here"
    verdict = local.safety_verdict(content=text)
    assert (verdict.safe, verdict.flag) == (False, "malware")
