"""The learned gates (pipeline/llm/local/gates.py): the shipped model matches the data it was trained on and was
trained for this code's features; a model of another contract is refused, and a process whose active model it
cannot read serves the shipped one, counted; the features read stance and structure."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from pipeline.llm.local import gate_data, gates


def _shipped_document() -> dict:
    return json.loads(gates.SHIPPED_PATH.read_text(encoding="utf-8"))


def test_the_shipped_model_was_trained_on_the_shipped_files():
    provenance = _shipped_document()["provenance"]
    for path in (gate_data.SAFETY_TRAIN, gate_data.SPAM_TRAIN, gate_data.FEATURES):
        assert provenance["training_files"][path.name] == hashlib.sha256(path.read_bytes()).hexdigest(), path.name
    assert provenance["moderator_labels"] == 0


def test_the_features_file_covers_exactly_the_training_and_held_out_texts():
    texts = {
        case["text"]
        for path in (gate_data.SAFETY_TRAIN, gate_data.SPAM_TRAIN, gate_data.HOLDOUT)
        for case in gate_data.read_jsonl(path)
    }
    assert set(gate_data.load_features()) == {gate_data.text_key(text) for text in texts}


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
