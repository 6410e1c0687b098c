"""The examples bench/gates_apart.py trains on (pipeline.gate_training.labelled_examples): a post written apart
teaches the safety gate (unsafe against the rest) and the topic layer (unsafe and edgy against the rest), an unsafe
or edgy one the stance layer (unsafe against edgy), and, unless it is unsafe, the spam gate (spam against edgy and
normal), at the weight asked. (The bench itself is not imported here: like every bench it sets its process's
environment at import, which would reach the stacks other tests start.)"""

from __future__ import annotations

from pipeline.gate_training import labelled_examples


def test_each_label_teaches_the_gates_it_belongs_to():
    cases = [
        {"label": "unsafe", "text": "u"},
        {"label": "edgy", "text": "e"},
        {"label": "spam", "text": "s"},
        {"label": "normal", "text": "n"},
    ]
    found = {(example.text, example.gate): example for example in labelled_examples(cases, 3.0, "apart")}
    assert sorted(found) == [
        ("e", "safety"),
        ("e", "spam"),
        ("e", "stance"),
        ("e", "topic"),
        ("n", "safety"),
        ("n", "spam"),
        ("n", "topic"),
        ("s", "safety"),
        ("s", "spam"),
        ("s", "topic"),
        ("u", "safety"),
        ("u", "stance"),
        ("u", "topic"),
    ]
    assert [key for key, example in found.items() if example.positive] == [
        ("u", "safety"),
        ("u", "topic"),
        ("u", "stance"),
        ("e", "topic"),
        ("s", "spam"),
    ]
    assert not found[("e", "stance")].positive
    assert found[("s", "spam")].positive and not found[("s", "safety")].positive
    assert {example.weight for example in found.values()} == {3.0}
    assert {example.source for example in found.values()} == {"apart"}
