"""The learned spam layer of the local analyzer (pipeline.llm.local.spam_classifier): bait that no phrase list
names is read as bait, in every language, and a post with specifics still passes. None of these texts is in
any data file (checked below)."""

from __future__ import annotations

import json

import pytest

from bench.content_sets import SPAM_FILE as TRAINING_FILE
from bench.content_sets import lines, spam_cases
from pipeline.llm import local
from pipeline.llm.local import spam_classifier
from pipeline.llm.local.quality import LEARNED_BAIT_AGREES, LEARNED_BAIT_THRESHOLD, SIGNALS, quality_signals

THRESHOLD = 0.2  # settings.QUALITY_THRESHOLD's default

# Spam whose words match none of the lexicon's bait phrases: only the model can read it.
UNNAMED_BAIT = [
    "Cooking up something special for a few lucky folks, ping me and I'll fill you in.",
    "Anyone around who wants in on a little side thing? Let me know.",
    "有个事儿挺适合你们的，老铁们来找我聊聊。",
    "兄弟们搞起来，懂的都懂，来找我。",
    "いい感じの話があるので、気になる人は声かけてね。",
    "面白いことやろうとしてます、乗りたい人は連絡ちょうだい。",
]

# Ordinary posts, terse or asking to be contacted, that must still pass.
ORDINARY = [
    "Need a Flutter dev to fix push notifications on Android 14, 300 USD, message me.",
    "Can someone explain how pgbouncer handles prepared statements in transaction mode?",
    "求一位懂 Rust 异步的朋友帮忙看一段 tokio 代码，大约 200 行，可付费。",
    "明日の勉強会の資料を共有します、Kubernetesのネットワーク入門、全40ページ。",
]

# Follow and engagement bait that a phrase list names and the model is sure of, padded with a figure, a handle or a
# day: the two readings agree, so the model's weight adds to the phrase's and the post is discarded.
AGREED_BAIT = [
    "F4F 🙌 follow me and I follow back within the hour, 200 new friends this week, drop your handle",
    "Follow train 🚂 drop your @ below, follow everyone who comments, I follow back 100%",
    "Like this if you agree, share it if you agree twice, comment YES and see what happens next 🔥",
    "相互フォロー大歓迎！フォローしてくれた方は全員フォロバします、3日以内に必ず🙌",
    "互粉互粉！关注我必回关，今天已经回关300人了，评论区留言就行",
]


def gated(text: str) -> bool:
    result = local.extract(content=text)
    return result.discard or result.quality < THRESHOLD


@pytest.mark.parametrize("text", UNNAMED_BAIT)
def test_bait_no_phrase_names_is_read_by_the_model_and_discarded(text):
    signals = quality_signals(text)
    assert "learned_bait" in signals, spam_classifier.spam_probability(text)
    assert gated(text)
    # The phrase lists alone would not discard it: without the model's signals the post keeps its score.
    assert sum(weight for name, weight in signals.items() if name not in ("learned_bait", "learned_spam")) > -0.25


@pytest.mark.parametrize("text", AGREED_BAIT)
def test_bait_named_and_read_by_the_model_adds_both_weights(text):
    assert spam_classifier.spam_probability(text) >= LEARNED_BAIT_AGREES
    signals = quality_signals(text)
    assert signals["learned_bait"] == SIGNALS["learned_bait"].weight
    assert gated(text)


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_posts_pass(text):
    assert spam_classifier.spam_probability(text) < LEARNED_BAIT_THRESHOLD
    assert not gated(text)


def test_the_model_is_calibrated_and_deterministic():
    cases = [json.loads(line) for line in TRAINING_FILE.read_text(encoding="utf-8").splitlines()]
    first, second = spam_classifier.train(cases[::3]), spam_classifier.train(cases[::3])
    assert first.probability(UNNAMED_BAIT[0]) == second.probability(UNNAMED_BAIT[0])
    spam = [first.probability(case["text"]) for case in cases[1::3] if case["label"] == "spam"]
    normal = [first.probability(case["text"]) for case in cases[1::3] if case["label"] == "normal"]
    # On cases it did not train on, the spam reads as spam far more often than the ordinary posts do.
    assert sum(p >= 0.5 for p in spam) / len(spam) > 0.6
    assert sum(p >= 0.5 for p in normal) / len(normal) < 0.1


def test_the_shipped_training_file_is_current_and_holds_no_held_out_case():
    assert TRAINING_FILE.read_text(encoding="utf-8") == lines(spam_cases())
    trained = {json.loads(line)["text"] for line in lines(spam_cases()).splitlines()}
    assert not trained & set(UNNAMED_BAIT + ORDINARY + AGREED_BAIT)
    from bench.content_sets import SPAM_SET, load_cases
    from bench.safety_set import split_of

    assert all(split_of(case["text"]) == "tuning" for case in load_cases(SPAM_SET) if case["text"] in trained)
