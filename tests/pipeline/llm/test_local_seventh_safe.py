"""The seventh pass (docs/benchmarks.md, "A seventh pass, ordinary posts"): the n-gram safety classifier balances
its classes within each language, so ordinary posts added in one language do not thin another language's ordinary
posts; short ordinary sales, gigs and pickups with payment terms (cash, transfer, deposit, paid on the day) are
published. Every text here was written for this test: none is in a labelled, fresh, probe or training file."""

from __future__ import annotations

import numpy as np
import pytest

from bench.review_queue import outcome
from pipeline.llm.local.ngram_fit import balanced_weights

# Four English rows (three unsafe), five Chinese (one unsafe), two of mixed language (none unsafe).
TARGET = np.array([1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0], dtype=np.float64)
GROUPS = np.array(["en"] * 4 + ["zh"] * 5 + ["mixed"] * 2)
CHOSEN = np.ones(len(TARGET), dtype=bool)


def _share(weights: np.ndarray, group: str, label: float) -> float:
    in_class = label == TARGET
    return float(weights[in_class & (group == GROUPS)].sum() / weights[in_class].sum())


def test_each_class_weighs_one_half():
    weights = balanced_weights(TARGET, CHOSEN, GROUPS)
    assert weights[TARGET == 1].sum() == pytest.approx(0.5)
    assert weights[TARGET == 0].sum() == pytest.approx(0.5)


def test_a_language_weighs_alike_in_both_classes():
    """English is 4 of 11 rows and Chinese 5: within each class they weigh 4 to 5, whatever their own mix of
    labels (globally balanced, English would be three quarters of the unsafe class and one eighth of the safe)."""
    weights = balanced_weights(TARGET, CHOSEN, GROUPS)
    for label in (0.0, 1.0):
        assert _share(weights, "en", label) / _share(weights, "zh", label) == pytest.approx(4 / 5)


def test_without_groups_the_classes_are_balanced_globally_as_before():
    weights = balanced_weights(TARGET, CHOSEN)
    assert weights[TARGET == 1] == pytest.approx(np.full(4, 0.5 / 4))
    assert weights[TARGET == 0] == pytest.approx(np.full(7, 0.5 / 7))


def test_rows_not_chosen_weigh_nothing():
    chosen = CHOSEN.copy()
    chosen[:2] = False
    weights = balanced_weights(TARGET, chosen, GROUPS)
    assert not weights[:2].any()
    assert weights[chosen & (TARGET == 1)].sum() == pytest.approx(0.5)


# Short ordinary posts with payment terms: each was discarded or held before this pass.
ORDINARY = [
    "Buying a second-hand lawn mower, petrol or electric, will pay cash and collect.",
    "Delivery every Friday: organic veg boxes to your door, pay online or cash to the driver.",
    "Hiring a van driver for a house move on the 12th, half day, paid in full on the day.",
    "找人帮忙装修刷墙，两个房间，按天结算工钱。",
    "同城跑腿送文件，下午要送到，价格按距离算，扫码付。",
    "ドラムセットを売ります。ほとんど使っていません。受け取り時に現金で。",
    # The sixth pass's known miss (docs/benchmarks.md), discarded on the blend alone before.
    "車を売ります。現金一括でお願いします。",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_posts_with_payment_terms_are_published(text):
    assert outcome(text) == ("published", "")
