"""JSON extraction (docs/model-layer.md#parsing-the-reply): a table of replies a model may send, and a round-trip
property."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.llm.jsonparse import JSONExtractionError, extract_json_object

OK = [
    ("bare object", '{"a": 1}', {"a": 1}),
    ("prose before and after", 'Here you go: {"a": 1} hope that helps', {"a": 1}),
    ("json code fence", 'Result:\n```json\n{"a": 1, "b": "x"}\n```', {"a": 1, "b": "x"}),
    ("plain code fence", '```\n{"a": [1, 2]}\n```', {"a": [1, 2]}),
    ("closing brace inside a string", '{"a": "}"}', {"a": "}"}),
    ("opening brace inside a string", '{"a": "{ not an object"}', {"a": "{ not an object"}),
    ("escaped quote inside a string", '{"a": "say \\"hi\\" {}"}', {"a": 'say "hi" {}'}),
    ("escaped backslash before quote", '{"a": "C:\\\\", "b": 2}', {"a": "C:\\", "b": 2}),
    ("unicode escape", '{"a": "caf\\u00e9"}', {"a": "café"}),
    ("nested objects", 'x {"a": {"b": {"c": 1}}, "d": []} y', {"a": {"b": {"c": 1}}, "d": []}),
    ("same object twice", '{"a": 1}\nagain: {"a": 1}', {"a": 1}),
    ("braces in prose that are not JSON", 'I {think} this is it: {"a": true}', {"a": True}),
    ("array in prose is not a candidate", 'items [1, 2] then {"a": null}', {"a": None}),
    ("multiline pretty printed", '{\n  "a": 1,\n  "b": {\n    "c": "d"\n  }\n}', {"a": 1, "b": {"c": "d"}}),
    ("trailing stray brace", '{"a": 1}}', {"a": 1}),
    (
        "non-ascii text",
        'Antwort: {"summary": "GPU-Stunden in München", "n": 2}',
        {"summary": "GPU-Stunden in München", "n": 2},
    ),
    ("empty object", "{}", {}),
]

ERRORS = [
    ("empty", "", "empty"),
    ("whitespace only", "   \n ", "empty"),
    ("no json at all", "I cannot help with that.", "no JSON object"),
    ("only an array", "[1, 2, 3]", "no JSON object"),
    ("object only inside an array", '[{"a": 1}]', "no JSON object"),
    ("truncated", '{"a": 1, "b": "unfinish', "truncated"),
    ("truncated nested", '{"a": {"b": 1}, "c": ', "truncated"),
    ("truncated in a fence", '```json\n{"a": 1,\n```', "truncated"),
    ("two different candidates", '{"a": 1} or {"a": 2}', "2 different"),
    ("three different candidates", '{"a": 1} {"b": 2} {"c": 3}', "3 different"),
    ("valid then truncated", '{"a": 1}\n{"a": 2, "b"', "truncated"),
    ("single quotes python dict", "{'a': 1}", "truncated"),
    ("trailing comma", '{"a": 1,}', "truncated"),
    ("NaN is not JSON", '{"a": NaN}', "truncated"),
    ("duplicate keys", '{"a": 1, "a": 2}', "truncated"),
]


@pytest.mark.parametrize(("case", "text", "expected"), OK, ids=[case for case, _, _ in OK])
def test_extracts_the_one_object(case, text, expected):
    assert extract_json_object(text) == expected


@pytest.mark.parametrize(("case", "text", "message"), ERRORS, ids=[case for case, _, _ in ERRORS])
def test_refuses_ambiguous_or_broken_replies(case, text, message):
    with pytest.raises(JSONExtractionError, match=message):
        extract_json_object(text)


def test_table_is_large_enough():
    assert len(OK) + len(ERRORS) >= 20


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
# Prose is anything without brackets: a model's chatter around the object ("{" in prose is covered above).
_prose = st.text(alphabet=st.characters(blacklist_characters="{}[]", blacklist_categories=("Cs",)), max_size=80)


@settings(deadline=None, max_examples=300)
@given(
    obj=st.dictionaries(st.text(max_size=8), _json_values, max_size=6),
    before=_prose,
    after=_prose,
    indent=st.sampled_from([None, 2]),
    fenced=st.booleans(),
)
@pytest.mark.slow  # a long property-based run (over 10 s)
def test_any_object_wrapped_in_prose_round_trips(obj, before, after, indent, fenced):
    body = json.dumps(obj, indent=indent, ensure_ascii=False)
    if fenced:
        body = f"```json\n{body}\n```"
    assert extract_json_object(f"{before}{body}{after}") == obj
