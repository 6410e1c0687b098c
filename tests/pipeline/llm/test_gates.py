"""The learned gates (pipeline/llm/local/gates.py): the shipped model matches the data it was trained on and was
trained for this code's features; a model of another contract is refused, and a process whose active model it
cannot read serves the shipped one, counted; the features read stance and structure."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from pipeline import gate_training
from pipeline.llm.local import gate_data, gates


def _shipped_document() -> dict:
    return json.loads(gates.SHIPPED_PATH.read_text(encoding="utf-8"))


def test_the_shipped_model_was_trained_on_the_shipped_files():
    provenance = _shipped_document()["provenance"]
    for path in (gate_data.SAFETY_TRAIN, gate_data.SPAM_TRAIN, gate_data.FEATURES, *gate_data.APART_SETS):
        assert provenance["training_files"][path.name] == hashlib.sha256(path.read_bytes()).hexdigest(), path.name
    assert provenance["moderator_labels"] == 0
    assert provenance["apart_weight"] == gate_data.APART_WEIGHT


def test_the_gates_learn_from_development_sets_written_apart_and_never_from_a_test_set():
    """The written-apart sets the shipped gates train on are development sets; the test sets stay unseen."""
    from bench import fresh_set

    for path in fresh_set.FRESH_SETS.values():
        assert (path in gate_data.APART_SETS) == ("development set" in fresh_set.STANDING[path]), path.name
    examples = gate_training.shipped_examples()
    assert {example.source for example in examples} == {"shipped", "apart"}
    # They teach spam, stance and topic; the safety layer learns from the analyzer's own posts and moderators only.
    assert {example.gate for example in examples if example.source == "apart"} == set(gate_data.APART_LAYERS)
    assert "safety" not in gate_data.APART_LAYERS


def test_the_features_file_covers_exactly_the_training_and_held_out_texts():
    texts = {
        case["text"]
        for path in (gate_data.SAFETY_TRAIN, gate_data.SPAM_TRAIN, gate_data.HOLDOUT, *gate_data.APART_SETS)
        for case in gate_data.read_jsonl(path)
    }
    assert set(gate_data.load_features()) == {gate_data.text_key(text) for text in texts}


def test_every_decision_post_has_estimates_from_layers_that_never_saw_it():
    """The decision is fitted on cross-fitted estimates: each written-apart development post's topic and stance as
    layers trained without its set read it (and each own post's, without its fold), which differ from what the
    shipped layers (trained on it) read."""
    cross = gate_data.load_cross_fitted()
    assert set(cross) == {gate_data.text_key(text) for text, _, _ in gate_training.decision_cases()}
    cases = gate_data.apart_cases()
    model, known = gates.shipped(), gate_data.load_features()
    sample = cases[::40]
    rows = gate_training.feature_matrix([case["text"] for case in sample], known)
    gaps = [
        abs(model.stance.probability(row) - cross[gate_data.text_key(case["text"])][1])
        for case, row in zip(sample, rows, strict=True)
    ]
    assert max(gaps) > 0.05  # out of fold, not the shipped layer's own reading


def test_the_shipped_decision_is_the_one_its_data_gives():
    shipped = gates.shipped().decision
    fitted = gate_training.fit_decision()
    assert np.allclose(shipped.weights, fitted.weights, atol=1e-6) and abs(shipped.bias - fitted.bias) < 1e-6


def test_a_set_held_out_of_training_is_held_out_of_the_decision():
    """The decision learns from the posts a training run sees: without a written-apart set, none of its rows."""
    held = {case["text"] for case in gate_data.read_jsonl(gate_data.APART_SETS[-1])}
    seen = {example.text for example in gate_training.shipped_examples() if example.text not in held}
    rows, _, _ = gate_training.decision_rows(seen)
    assert len(rows) == len(gate_training.decision_cases()) - len(held)


def test_the_held_out_file_is_the_held_out_halves_of_the_labelled_sets():
    assert gate_data.read_jsonl(gate_data.HOLDOUT) == gate_data.holdout_from_bench()


def test_the_shipped_model_reads_with_this_code():
    model = gates.shipped()
    assert model.safety.weights.shape == (gates.WIDTH,)
    assert _shipped_document()["contract"] == gates.CONTRACT


def test_a_model_of_another_contract_is_refused():
    document = _shipped_document()
    with pytest.raises(gates.ContractMismatch, match="contract"):
        gates.from_document({**document, "contract": "gates_v0"})
    with pytest.raises(gates.ContractMismatch, match="scalars"):
        gates.from_document({**document, "scalars": [*gates.SCALARS, "extra"]})
    for layer in ("stance", "topic"):
        without = {name: value for name, value in document.items() if name != layer}
        with pytest.raises(gates.ContractMismatch, match=layer):
            gates.from_document(without)
    with pytest.raises(gates.ContractMismatch, match="decision"):
        gates.from_document({name: value for name, value in document.items() if name != "decision"})
    other_inputs = {**document, "decision": {**document["decision"], "inputs": ["harm"]}}
    with pytest.raises(gates.ContractMismatch, match="decision"):
        gates.from_document(other_inputs)
    short = {**document, "spam": {"bias": 0.0, "weights": [0.0] * (gates.WIDTH - 1)}}
    with pytest.raises(gates.ContractMismatch, match="weights"):
        gates.from_document(short)


def test_using_a_model_changes_what_the_analyzer_judges_with():
    from pipeline.llm.local.quality import quality_signals

    text = "Great opportunity, DM me for details, limited spots."
    always_spam = gates.GateModel(gates.shipped().safety, gates.Layer(np.zeros(gates.WIDTH), 20.0), version="test")
    assert "learned_bait" not in quality_signals("Renting 8 A100 GPUs in Frankfurt, 2 EUR/hour, InfiniBand.")
    with gates.using(always_spam):
        assert gates.current() is always_spam
        assert quality_signals("Renting 8 A100 GPUs in Frankfurt, 2 EUR/hour, InfiniBand.")["learned_bait"] < 0
    assert gates.current() is not always_spam
    assert quality_signals(text)  # the shipped model judges again


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Sign up with my referral code XYZ123 and we both get a bonus", "referral"),
        ("用我的邀请码注册，立刻领红包", "referral"),
        ("buy buy buy buy now now cheap cheap buy buy buy", "repetition"),
    ],
)
def test_spam_structure_is_a_feature(text, name):
    scalars = dict(zip(gates.SCALARS, gates.scalar_features(text), strict=True))
    assert scalars[name] > 0


def _spam_gate_at(probability: float) -> gates.GateModel:
    bias = float(np.log(probability / (1.0 - probability)))
    return gates.GateModel(gates.shipped().safety, gates.Layer(np.zeros(gates.WIDTH), bias), version="test")


def test_a_sure_spam_gate_discards_a_post_the_rules_would_keep(settings):
    """From SPAM_GATE_BLOCK the spam gate decides alone: a vague offer the phrase lists let through is discarded as
    spam when the gate reads it at 0.5; at 1.0 (off) it is kept."""
    from pipeline.llm.local.extraction import extract

    text = "Open to a couple of new collaborations this month, reach out if you think we would fit."
    settings.SPAM_GATE_BLOCK = 1.0
    with gates.using(_spam_gate_at(0.5)):
        assert not extract(content=text).discard
        settings.SPAM_GATE_BLOCK = 0.5
        found = extract(content=text)
    assert (found.discard, found.discard_reason) == (True, "spam")


def test_the_default_bar_discards_a_vague_post_the_gate_reads_at_four_in_ten():
    """SPAM_GATE_BLOCK's default (0.35, chosen on the written-apart development sets held out in turn): a vague post
    the gate reads at 0.4 is discarded as spam, at 0.3 it is kept (the quality score decides, and passes it)."""
    from pipeline.llm.local.extraction import extract

    text = "Open to a couple of new collaborations this month, reach out if you think we would fit."
    with gates.using(_spam_gate_at(0.4)):
        found = extract(content=text)
    assert (found.discard, found.discard_reason) == (True, "spam")
    with gates.using(_spam_gate_at(0.3)):
        assert not extract(content=text).discard


def test_a_scam_warning_is_left_to_the_rest_however_sure_the_spam_gate(settings):
    """A warning reads like the bait it names: the spam gate does not decide alone on it."""
    from pipeline.llm.local.quality import quality_signals

    settings.SPAM_GATE_BLOCK = 0.5
    with gates.using(_spam_gate_at(0.6)):
        assert "learned_spam" not in quality_signals(
            "Scam alert: posts promising easy money for a small deposit are fraud, do not send anything."
        )
        assert "learned_spam" in quality_signals("Posts promising easy money for a small deposit, message me.")


def test_each_specific_raises_the_spam_gates_bar(settings):
    """A concrete offer (figures, a price, a product) needs a surer gate: its specifics add to SPAM_GATE_BLOCK."""
    from pipeline.llm.local.extraction import extract

    text = "Renting 8 A100 GPUs in Frankfurt, 2 EUR/hour, InfiniBand between nodes, book for next week."
    settings.SPAM_GATE_BLOCK = 0.5
    with gates.using(_spam_gate_at(0.6)):
        assert not extract(content=text).discard
    with gates.using(_spam_gate_at(0.99)):
        assert extract(content=text).discard_reason == "spam"
