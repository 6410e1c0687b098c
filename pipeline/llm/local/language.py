"""Language detection: langdetect with a fixed seed for real sentences, a script count for short text."""

from __future__ import annotations

import threading

import regex
from langdetect import DetectorFactory, LangDetectException, detect

DetectorFactory.seed = 0  # langdetect is randomised; a fixed seed makes it deterministic
_LOCK = threading.Lock()  # the detector factory is lazily initialised and not thread-safe
_SCRIPTS = (
    ("ja", regex.compile(r"[\p{Hiragana}\p{Katakana}]")),
    ("ko", regex.compile(r"\p{Hangul}")),
    ("zh", regex.compile(r"\p{Han}")),
    ("ru", regex.compile(r"\p{Cyrillic}")),
    ("ar", regex.compile(r"\p{Arabic}")),
    ("el", regex.compile(r"\p{Greek}")),
    ("he", regex.compile(r"\p{Hebrew}")),
    ("hi", regex.compile(r"\p{Devanagari}")),
    ("th", regex.compile(r"\p{Thai}")),
)
_LETTER = regex.compile(r"\p{L}")
MIN_LETTERS_FOR_LANGDETECT = 25


def by_script(text: str) -> str:
    """The language of the dominant non-Latin script; Japanese kana win over shared Han characters."""
    counts = {code: len(pattern.findall(text)) for code, pattern in _SCRIPTS}
    if counts["ja"]:
        return "ja"
    code, count = max(counts.items(), key=lambda pair: pair[1])
    if count:
        return code
    return "en" if _LETTER.search(text) else "und"


def detect_language(text: str) -> str:
    letters = len(_LETTER.findall(text))
    if letters == 0:
        return "und"
    script = by_script(text)
    if letters < MIN_LETTERS_FOR_LANGDETECT or script in {"ja", "ko", "zh"}:
        return script
    try:
        with _LOCK:
            code: str = detect(text)
    except LangDetectException:
        return script
    return code.split("-")[0].lower()
