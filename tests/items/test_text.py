import pytest

from items.api.schemas import weighted_length
from items.text import content_hash, normalise_content, text_problem


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("hello", 5),
        ("你好", 4),
        ("ひらがな", 8),
        ("カタカナ", 8),
        ("한국어", 6),
        ("a你b", 4),
        ("Ｆｕｌｌ", 4),  # full-width Latin is not one of the four wide scripts
        ("😀", 1),
    ],
)
def test_weighted_length(text, expected):
    assert weighted_length(text) == expected


def test_normalise_folds_case_width_and_whitespace():
    assert normalise_content("  Ｈello\t\n  WORLD  ") == "hello world"
    assert content_hash("Hello   world") == content_hash("hello world")
    assert content_hash("hello world") != content_hash("hello world!")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("plain", None),
        ("emoji 😀 and 台风", None),
        ("a\ud800b", "must not contain unpaired surrogate code points"),
        ("\udfff", "must not contain unpaired surrogate code points"),
        ("nul\x00", "must not contain NUL characters"),
    ],
)
def test_text_problem_names_what_postgresql_cannot_store(value, problem):
    assert text_problem(value) == problem
