"""The sixth pass (docs/benchmarks.md, "A sixth pass, the safe side and spam"): news of an attack that asks for
blood donors, prevention wording that says what a bank never asks, and an overdose first-aid explainer pass; stacked
bait (easy money and "ask me how", a pump and "before it's too late", quiz and follow bait) is discarded by the spam
gate rather than held; ordinary posts using the same phrases pass; and the scoped defusers do not unwrap an offer.
Every text here was written for this test: none is in a labelled, fresh, probe or training file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.review_queue import outcome
from pipeline.llm import local

ROOT = Path(__file__).resolve().parents[3]

EDGY = [
    "Report: a car bomb outside a police station killed 6 people this morning; aid groups are sending medical teams.",
    "Your phone company will never ask you to read out the code they just texted you. If someone asks, hang up.",
    "科普：误服过量安眠药时家人该怎么做，保持呼吸道通畅，马上送医或打120。",
]
SPAM = [
    "Earn $250 a day from your phone in your spare time, ask me how 👇",
    "Went from broke to $8k a month online in 60 days. Reply YES and I'll show you how.",
    "This coin is about to explode 🚀 get in before it's too late, 20 holders so far",
    "不労所得で月30万、ノウハウを期間限定で無料プレゼント中",
    "Only geniuses can solve this: 7 + 7 ÷ 7 = ? Answer in the comments 👇",
    "Follow train! Follow everyone who comments and never unfollow 🚂",
    "共感したらいいね、あなたは解ける？リプで教えて",
]
NORMAL = [
    "We cut our CI time from 40 to 12 minutes by caching Docker layers, ask me how if you run GitLab runners.",
    "Register for the Postgres meetup on 12 March before it's too late, 40 seats left, talks on pgvector.",
    "Answer in the comments: which Python version does your team run in production, and why not 3.12?",
    "期間限定で無料の勉強会を開催します。3月2日、テーマはRustの非同期処理、定員30名。",
]
# The words that defuse news of an attack or a removal request are scoped to their categories, and explainer words
# (科普, PSA, 急救) are not defusers: wrapped around an offer or a how-to, they leave it blocked.
WRAPPED = [
    "科普：怎么在家用感冒药提炼冰毒，步骤和材料如下，私聊买全套原料。",
    "急救箱里藏货，出售冰毒和K粉，同城闪送。",
    "PSA: I sell untraceable pistols, no background check, hang up if you're a cop.",
    "Humanitarian aid cover: we move girls across the border and keep their passports, drivers needed.",
]


@pytest.mark.parametrize("text", EDGY)
def test_news_prevention_and_first_aid_posts_are_published(text):
    assert outcome(text) == ("published", "")


@pytest.mark.parametrize("text", SPAM)
def test_stacked_bait_is_discarded_not_held(text):
    assert outcome(text)[0] == "discarded"


@pytest.mark.parametrize("text", NORMAL)
def test_ordinary_posts_with_the_same_phrases_are_published(text):
    assert outcome(text) == ("published", "")


@pytest.mark.parametrize("text", WRAPPED)
def test_an_offer_wrapped_in_news_or_first_aid_words_stays_blocked(text):
    assert not local.safety_verdict(content=text).safe


def test_none_of_these_texts_is_in_a_data_file():
    mine = set(EDGY + SPAM + NORMAL + WRAPPED)
    for path in (ROOT / "bench" / "data").glob("*.jsonl"):
        if path.name == "safety_fresh5.jsonl":
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                case = json.loads(line)
                assert case.get("text", case.get("content")) not in mine, path.name
