"""The ranker's contract and model file (docs/feed-ranker.md): the contract's shape is fixed, an unknown broadcast
type lands in the "other" bucket, and the loader refuses a model whose contract, shape or self-tests do not match
this code. The fit and the offline metrics on data whose answers are known."""

from __future__ import annotations

import numpy as np
import pytest

from items.ranker.contract import CONTRACT, FEATURES, WIDTH, feature_matrix, fingerprint
from items.ranker.fit import auc, fit_logistic, ips_estimate, logged_ndcg
from items.ranker.model import ModelRefused, model_load, sigmoid
from tests.items.ranker.factories import document


def test_the_contract_is_immutable_and_unknown_types_go_to_other():
    # A change of the feature list is a new contract version, never an edit of this one.
    assert CONTRACT == "ranker_features_v3" and WIDTH == 21
    assert fingerprint() == "621e27be177b28e4"
    assert fingerprint("ranker_features_v2", FEATURES[:20]) == "d15494be79cb0df7"  # v3 is v2 and one more column
    raw = {name: np.array([0.5, 0.25]) for name in FEATURES[:11]}
    matrix = feature_matrix(raw, ["demand", "poll"], np.array([True, False]), True)
    assert matrix.shape == (2, WIDTH)
    assert matrix[0, FEATURES.index("type=demand")] == 1 and matrix[1, FEATURES.index("type=other")] == 1
    assert matrix[:, FEATURES.index("reader_history")].tolist() == [1, 1]
    assert matrix[:, FEATURES.index("explorable")].tolist() == [1, 0]
    # No judgments: every type at the uniform share.
    assert matrix[:, FEATURES.index("own_type_up")].tolist() == [0.2, 0.2]


def test_a_liking_beyond_the_profile_counts_only_where_the_profile_does_not_reach():
    """own_beyond_profile: what the reader liked (own_feedback, when positive) times how little the profile matches
    (1 - match): an item of an unstated taste scores, one of the profile's own topic or one it disliked does not."""
    raw = {name: np.zeros(4) for name in FEATURES[:11]}
    raw["own_feedback"] = np.array([0.5, 0.5, -0.4, 0.5])
    raw["match"] = np.array([0.0, 0.8, 0.0, 1.3])
    matrix = feature_matrix(raw, ["info"] * 4, np.zeros(4), True)
    assert matrix[:, FEATURES.index("own_beyond_profile")].tolist() == pytest.approx([0.5, 0.1, 0.0, 0.0])


def test_the_readers_type_shares_are_smoothed_and_sum_to_one_over_the_buckets():
    raw = {name: np.zeros(6) for name in FEATURES[:11]}
    kinds = ["supply", "demand", "info", "alert", "poll", "demand"]
    matrix = feature_matrix(raw, kinds, np.zeros(6), True, {"demand": (3.0, 0.0), "poll": (0.0, 1.0)})
    up, down = matrix[:, FEATURES.index("own_type_up")], matrix[:, FEATURES.index("own_type_down")]
    assert up.tolist() == pytest.approx([1 / 8, 4 / 8, 1 / 8, 1 / 8, 1 / 8, 4 / 8])
    assert down.tolist() == pytest.approx([1 / 6, 1 / 6, 1 / 6, 1 / 6, 2 / 6, 1 / 6])
    assert up[:5].sum() == pytest.approx(1.0) and down[:5].sum() == pytest.approx(1.0)


def test_a_model_that_checks_loads_and_scores_as_its_self_tests_say():
    model = model_load(document({"match": 2.0, "type=demand": -1.0}, intercept=0.5), model_id=3)
    vector = np.zeros(WIDTH)
    vector[FEATURES.index("match")] = 1.0
    assert model.logits(vector[None, :]).tolist() == [2.5]
    assert model.parts(vector) == {"match": 2.0}
    assert sigmoid(2.5) == pytest.approx(0.924142, abs=1e-6)


@pytest.mark.parametrize(
    ("breakage", "reason"),
    [
        (lambda doc: doc.update(contract="ranker_features_v0"), "contract"),
        (lambda doc: doc.update(features=doc["features"][::-1]), "contract"),
        (lambda doc: doc.update(weights=doc["weights"][:-1]), "shape"),
        (lambda doc: doc.update(weights=[*doc["weights"][:-1], float("nan")]), "shape"),
        (lambda doc: doc["self_tests"][1].update(logit=doc["self_tests"][1]["logit"] + 0.01), "self_test"),
        (lambda doc: doc["self_tests"][0].update(probability=0.9), "self_test"),
        (lambda doc: doc.update(self_tests=[]), "self_test"),
        (lambda doc: doc.update(format=2), "format"),
    ],
)
def test_a_model_whose_contract_shape_or_self_tests_do_not_match_is_refused(breakage, reason):
    doc = document({"match": 1.0})
    breakage(doc)
    with pytest.raises(ModelRefused) as refused:
        model_load(doc)
    assert refused.value.reason == reason


def test_the_fit_finds_the_feature_that_predicts_and_the_metrics_see_it():
    rng = np.random.default_rng(7)
    matrix = rng.normal(size=(400, 3))
    labels = (matrix[:, 1] + 0.3 * rng.normal(size=400) > 0).astype(float)
    weights, _ = fit_logistic(matrix, labels, l2=1.0)
    assert np.argmax(np.abs(weights)) == 1 and weights[1] > 2
    assert auc(matrix[:, 1], labels) > 0.9 > auc(matrix[:, 0], labels)
    assert auc(np.array([1.0, 0.0]), np.array([1.0, 1.0])) is None
    pages = np.array(["a", "a", "b", "b"], dtype=object)
    ordered, labels4 = np.array([2.0, 1.0, 2.0, 1.0]), np.array([1.0, 0.0, 0.0, 1.0])
    assert logged_ndcg(ordered, labels4, pages) == pytest.approx((1 + 1 / np.log2(3)) / 2)
    # The first of each page: a positive on page a, a negative on page b, weighted alike.
    assert ips_estimate(ordered * 100, labels4, pages, np.ones(4)) == pytest.approx(0.5)
    # A positive drawn with probability 1/4 weighs four times its ranked neighbour.
    assert ips_estimate(np.zeros(2), np.array([1.0, 0.0]), pages[:2], np.array([0.25, 1.0])) == pytest.approx(0.8)


def test_the_fit_stays_at_its_prior_without_evidence_and_leaves_it_with_evidence():
    rng = np.random.default_rng(3)
    matrix = rng.normal(size=(400, 3))
    labels = (matrix[:, 1] + 0.3 * rng.normal(size=400) > 0).astype(float)
    prior = np.array([2.0, 0.0, -1.0])
    # Column 0 says nothing about the labels: its weight stays near the prior's 2, not near 0.
    weights, _ = fit_logistic(matrix, labels, l2=50.0, prior=prior)
    unpulled, _ = fit_logistic(matrix, labels, l2=50.0)
    assert weights[0] > 0.5 and abs(unpulled[0]) < 0.2
    # Column 1 predicts: the data move its weight far from the prior's 0.
    assert weights[1] > 1
    # Four rows are no evidence: the weights are the prior's.
    few, _ = fit_logistic(matrix[:4], labels[:4], l2=1000.0, prior=prior)
    assert few == pytest.approx(prior, abs=0.02)


def test_the_fit_does_not_overshoot_on_separable_data_far_from_its_prior():
    """Newton's method with full steps, started at a prior far from the data, diverged (weights in the hundreds of
    thousands): each step is halved until the objective does not rise."""
    rng = np.random.default_rng(11)
    matrix = rng.normal(size=(200, 2)) * 5
    labels = (matrix[:, 0] > 0).astype(float)  # separable: only the penalty bounds the weights
    weights, intercept = fit_logistic(matrix, labels, l2=1e-3, prior=np.array([50.0, -50.0]))
    assert np.isfinite(weights).all() and np.isfinite(intercept)
    assert np.abs(weights).max() < 1e3 and abs(intercept) < 1e3
    assert weights[0] > 0  # the separating feature keeps its sign
