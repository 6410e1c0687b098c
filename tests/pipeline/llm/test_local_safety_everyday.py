"""Unsafe posts said in everyday words, with no lexicon word: both learned layers agree, neither is sure alone
(docs/benchmarks.md, "Both learned layers agree"); minors named by an age limit; spam said in other words. Every
text here was written for this test: none is in a labelled set or a training file."""

from __future__ import annotations

import numpy as np
import pytest

from bench.review_queue import outcome
from pipeline.llm import local
from pipeline.llm.local import gates
from pipeline.llm.local.normalise import fold
from pipeline.llm.local.safety import _corroborated
from pipeline.llm.local.safety_rules import rule_hits

# Blocked by the corroborated blend; the analyzer before it held them for a moderator (or published the first).
EVERYDAY_HARM = [
    "Need a couple of lads to pay the shop owner on Dale Road a visit after closing, make sure he can't open up "
    "again for a month. Cash on the night.",
    "That neighbour who called the council on my dog walks past the canal every night. Some friends of mine will be "
    "waiting there, he won't be walking for a while.",
    "Workers available from our agency, they owe us for the boat so they do whatever hours you need, no contracts, "
    "pay us not them.",
]

# The same subjects on the safe side, and ordinary posts that share their words.
SAFE_TWINS = [
    "Hotel housekeeping found a hidden camera in a guest bathroom; police were called and we're checking every room.",
    "Bank fraud team warning: we will never phone you to move your savings. If someone does, hang up and call the "
    "number on your card.",
    "Survivors of labour trafficking can get free legal help if an employer kept their passport or made them repay "
    "flights.",
    "Need a couple of lads to help move a piano out of my flat on Saturday, paying 40 each plus pizza.",
    "Spreadsheet template for gym owners: members, renewals and class bookings, free to copy.",
    "Hostess wanted for our family restaurant, evenings, 14 an hour plus tips, training provided.",
]


@pytest.mark.parametrize("text", EVERYDAY_HARM)
def test_harm_in_everyday_words_is_stopped(text):
    """No category rule names these; the n-gram layer and the learned gate agree: blocked, or (the first, which the
    gate reads at 0.77, short of the corroborated blend's 0.85) held for a moderator."""
    assert outcome(text)[0] in ("discarded", "held"), local.safety_verdict(content=text)


@pytest.mark.parametrize("text", EVERYDAY_HARM)
def test_the_corroborated_blend_is_what_blocks_them(text, settings):
    """With the embedding layer's own block threshold out of reach, the corroborated blend alone blocks them; with
    both corroborations off (this one, and SAFETY_LOCAL_BLEND_CORROBORATES, which blocks on the blend when a
    category's word is there too) no layer is sure enough alone to block."""
    settings.SAFETY_LOCAL_EMBEDDING_BLOCK_THRESHOLD = 0.999
    blocked = not local.safety_verdict(content=text).safe
    assert blocked or text == EVERYDAY_HARM[0]
    settings.SAFETY_LOCAL_CORROBORATED_BLEND = 1.0
    settings.SAFETY_LOCAL_BLEND_CORROBORATES = 1.0
    verdict = local.safety_verdict(content=text)
    assert verdict.safe, verdict


def test_a_post_naming_spams_own_bait_is_left_to_the_spam_gate(settings):
    """With both corroboration thresholds at zero every text without a defusing word would be blocked; a post that
    names easy money, a pump, engagement bait or a test is not: the spam gate discards it as spam."""
    settings.SAFETY_LOCAL_CORROBORATED_BLEND = 0.0
    settings.SAFETY_LOCAL_CORROBORATED_NGRAM = 0.0
    bait = "Make money fast from your sofa!!! Limited offer, sign up here http://x.example"
    assert outcome(bait) == ("discarded", "extraction:spam")
    sure = gates.GateModel(gates.Layer(np.zeros(gates.WIDTH), 2.0), gates.shipped().spam, version="sure")
    with gates.using(sure):  # a gate that reads everything as unsafe (0.88), below its own block threshold
        assert local.safety_verdict(content=bait).safe
        # The same post without "make money fast" is blocked: the exemption is what lets it through.
        assert not local.safety_verdict(content="Make pottery fast from your sofa!!! Limited offer, sign up here").safe


@pytest.mark.parametrize("text", SAFE_TWINS)
def test_their_safe_twins_and_ordinary_posts_reach_readers(text):
    assert outcome(text)[0] == "published", local.safety_verdict(content=text)


def test_the_corroborated_blend_needs_both_layers_and_no_defusing_word(settings):
    blend, ngram = settings.SAFETY_LOCAL_CORROBORATED_BLEND, settings.SAFETY_LOCAL_CORROBORATED_NGRAM
    assert _corroborated(ngram, blend, False)
    assert not _corroborated(ngram, blend, True)
    assert not _corroborated(ngram - 0.01, 0.99, False)
    assert not _corroborated(0.99, blend - 0.01, False)


def test_a_minor_named_by_an_age_limit_meets_the_hard_rule():
    """ "under 13" is a minor as "under 16" was: with a sexual word near it, always blocked."""
    text = "Anyone selling explicit videos of boys under 13? Paying well."
    assert any(hit.kind == "hard_rule" for hit in rule_hits(fold(text)))
    assert local.safety_verdict(content=text).flag == "child_safety"


@pytest.mark.parametrize(
    "text",
    [
        "Quiet accumulation on this small-cap ticker, insiders are buying ahead of Monday. Get in while it's cheap.",
        "I follow back every single account, just drop your handle in the replies 🔁",
        "相互フォローしませんか？フォロバ率100%です",
        "共感した人はRTして！フォロバもします",
        "明天必涨停的票，内幕消息，进群免费领",
    ],
)
def test_pumps_and_follow_bait_said_in_other_words_are_discarded(text):
    assert outcome(text)[0] == "discarded"


@pytest.mark.parametrize(
    "text",
    [
        "We follow back on support tickets within 4 hours; escalations go to the on-call engineer.",
        "Our stock screener now flags small-cap tickers with unusual volume; free for students this term.",
        "株主優待の新しい制度が6月から始まります。100株以上の保有で年2回、自社製品を送付。",
        "A股周报：本周沪指涨1.1%，券商板块领涨，北向资金净流入85亿元。",
    ],
)
def test_ordinary_posts_with_those_words_are_published(text):
    assert outcome(text)[0] == "published"


@pytest.mark.parametrize(
    ("disguised", "plain"),
    [("m🌿d🌿m🌿a", "mdma"), ("k🔪i🔪l🔪l", "kill"), ("h❄️e❄️r❄️o❄️i❄️n", "heroin"), ("炸💣弹", "炸弹")],
)
def test_emoji_between_letters_are_separators(disguised, plain):
    assert fold(disguised) == plain


@pytest.mark.parametrize("text", ["I ❤️ u", "great 🚀🚀 launch", "GPU 🔥 A100 🔥 H100", "ok 👍 sure"])
def test_emoji_between_words_stay(text):
    assert fold(text) == text.casefold()
