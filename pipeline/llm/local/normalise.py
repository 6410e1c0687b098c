"""Folds the disguises of a text before the safety rules and the classifier read it: full-width forms, zero-width
characters, look-alike letters from other scripts, leetspeak and letters spaced or dotted apart ("b.o.m.b")."""

from __future__ import annotations

import unicodedata

import regex

# Cyrillic and Greek letters that render like Latin ones (lower case; the text is case-folded first).
_LOOKALIKES = str.maketrans(
    {
        "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c",
        "т": "t", "у": "y", "х": "x", "і": "i", "ї": "i", "ј": "j", "ѕ": "s", "ԁ": "d", "ɡ": "g", "ӏ": "l",
        "α": "a", "β": "b", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u",
        "χ": "x", "ω": "w",
    }
)  # fmt: skip
_LEET = str.maketrans(
    {"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "8": "b", "@": "a", "$": "s", "!": "i"}
)
# A word that mixes letters with the digits and symbols leetspeak uses; "h100" or "gpt4" (one letter, or more
# digits than letters) stays as it is.
_LEET_WORD = regex.compile(r"(?<![\p{L}\p{N}])[\p{Latin}0-9@$!]*[0-9@$!][\p{Latin}0-9@$!]*(?![\p{L}\p{N}])")
# What may split the letters of a word: spaces, punctuation, and emoji (with their variation selector), "c❄️o❄️k❄️e".
_SEPARATOR = r"[ .\-_*·/|+\p{Extended_Pictographic}\ufe0f]"
# Three or more single letters (or leet digits) split by separators: "b o m b", "k.i.l.l", "b-0-m-b".
_SPACED = regex.compile(
    rf"(?<![\p{{Latin}}\p{{N}}])(?:[\p{{Latin}}0-9@$]{_SEPARATOR}{{1,3}}){{2,}}[\p{{Latin}}0-9@$](?![\p{{Latin}}\p{{N}}])"
)
_SPACED_SEPARATORS = regex.compile(_SEPARATOR)
_CJK = r"[\p{Han}\p{Hiragana}\p{Katakana}ー]"
# Separators dropped between two CJK characters ("炸 弹", "爆.弾", "炸💣弹"); that text has no spaces anyway.
_CJK_GAP = regex.compile(rf"(?<={_CJK}){_SEPARATOR}{{1,3}}(?={_CJK})")
_INVISIBLE = regex.compile(r"[\p{Cf}\u115f\u1160\u3164\uffa0]")
# Accents on Latin, Greek and Cyrillic letters only: the kana's voicing marks are letters' meaning.
_ACCENT = regex.compile(r"(?<=[\p{Latin}\p{Greek}\p{Cyrillic}]\p{Mn}*)\p{Mn}")


def _unleet(match: regex.Match[str]) -> str:
    word = match.group(0)
    letters = sum(char.isalpha() for char in word)
    if letters < 2 or letters < len(word) - letters:
        return str(word)
    return str(word.translate(_LEET))


def _join_spaced(match: regex.Match[str]) -> str:
    joined = str(_SPACED_SEPARATORS.sub("", match.group(0)))
    return joined.translate(_LEET) if any(char.isalpha() for char in joined) else joined


def fold(text: str) -> str:
    """The text as the safety layers read it: NFKC, case-folded, invisible marks and look-alikes removed,
    leetspeak read as letters and spaced-out letters joined. Idempotent."""
    folded = unicodedata.normalize("NFD", _INVISIBLE.sub("", unicodedata.normalize("NFKC", text).casefold()))
    folded = unicodedata.normalize("NFC", _ACCENT.sub("", folded))
    folded = folded.translate(_LOOKALIKES)
    folded = _SPACED.sub(_join_spaced, folded)
    folded = _LEET_WORD.sub(_unleet, folded)
    return str(_CJK_GAP.sub("", folded))
