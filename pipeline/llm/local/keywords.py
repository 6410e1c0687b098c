"""Keywords a reader would search for: YAKE for spaced languages, jieba for Chinese and Janome for Japanese
(pipeline.llm.local.segmentation), with product and technical names (A100, libxml2, CVE-…) first, and
without stop-phrases (lexicon `keyword_stop`: currencies, months, "remote", "team", "years"…) or type cue words.
A term whose first or last word is a stop word loses it ("parsers today" -> "parsers")."""

from __future__ import annotations

import functools
import re
import threading
from itertools import zip_longest

import regex
import yake

from pipeline.llm.local.lexicon import lexicon
from pipeline.llm.local.segmentation import chinese_keywords, japanese_keywords, korean_keywords

_CJK = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]")
_CJK_RUNS = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}ー]+")
# Latin names worth keeping from a segmenter's output: A100, GPU, OpenSSL.
_PRODUCT_NAME = regex.compile(r"^(?:[A-Za-z][A-Za-z.+-]*\d[\w.+-]*|[A-Z]{2,}[\w.+-]*|[A-Z][a-z]+[A-Z]\w*)$")
# The same names found in running text, only those YAKE tends to split or miss: with a digit (A100, libxml2,
# CVE-2030-1188), a capital inside (PostgreSQL), or an acronym and its number (RTX 4090). At most MAX_NAMES go
# first; bare acronyms (AI, API) and "Name 2.0" are left to YAKE, which keeps their context ("ml engineer").
_NAME_IN_TEXT = regex.compile(
    r"(?<![\w.-])(?:CVE-\d{4}-\d{3,}|[A-Za-z]{2,}[A-Za-z.+-]*\d[\w+-]*|[A-Z][a-z]+[A-Z]\w*|[A-Z]{2,} \d{3,5})(?![\w.-])"
)
MAX_NAMES = 2
_LATIN_WORDS = regex.compile(r"\b[a-zA-Z][a-zA-Z0-9-]+\b")
# A Latin word inside Chinese or Japanese text is nearly always a name (Django, Solidity, Chrome); `\b` does not
# separate it from the characters around it (they are word characters too), so the edges are Latin-only.
_LATIN_IN_CJK = regex.compile(
    r"(?<![A-Za-z0-9.+#-])[A-Za-z][A-Za-z0-9.+#-]*[A-Za-z0-9+#]|(?<![A-Za-z0-9])[A-Z](?![A-Za-z0-9])"
)
_DIGITS = re.compile(r"\d")
# A count with its counter is no topic: 三周, 一个月, 十八天, 3か月.
_CJK_COUNT = regex.compile(
    r"^[\d一二两三四五六七八九十百千万几]+(?:个)?(?:天|周|月|年|小时|か月|ヶ月|日|時間|週間?|名|人|张|台)$"
)
_YAKE_LOCK = threading.Lock()
_YAKE_LANGS = {"en", "de", "fr", "es", "it", "pt", "nl", "pl", "ru", "sv", "da", "fi", "no", "tr", "cs", "hu"}
# Languages written without spaces between words get a real segmenter (YAKE needs words to split on).
_SEGMENTERS = {"zh": chinese_keywords, "ja": japanese_keywords, "ko": korean_keywords}
# Short all-capital words that name nothing a reader searches for.
_NOT_NAMES = frozenset({"dm", "pm", "asap", "faq", "usd", "eur", "gbp", "jpy", "rmb", "utc", "ok", "qa", "ai"})


@functools.lru_cache(maxsize=32)
def _yake(lang: str) -> yake.KeywordExtractor:
    return yake.KeywordExtractor(lan=lang, n=2, dedup_lim=0.7, top=16)


@functools.cache
def _cue_words() -> frozenset[str]:
    """Type cue words ("offering", "alert") say what kind of broadcast it is, not what it is about. Only the
    Latin ones: Chinese and Japanese cues (漏洞 vulnerability, 停電 power cut) name the topic as well."""
    return frozenset(term for terms in lexicon()["type_cues"].values() for term in terms if term.isascii())


@functools.cache
def stop_words() -> frozenset[str]:
    return frozenset(lexicon()["keyword_stop"])


@functools.cache
def _topic_stop_words() -> frozenset[str]:
    """For a topic named in a sentence, also the one-word cue words ("offering rust" -> "rust"); keywords keep
    them inside a term ("power outage" is what a reader searches for)."""
    return stop_words() | {term for term in _cue_words() if " " not in term}


def clean(term: str, *, topic: bool = False) -> str:
    """The term lower-cased, without surrounding punctuation and stop words at either end ("" if nothing is left)."""
    words = " ".join(term.lower().split()).strip(".,;:!?\"'()[]").split(" ")
    stop = _topic_stop_words() if topic else stop_words()
    while words and words[0] in stop:
        words.pop(0)
    while words and words[-1] in stop:
        words.pop()
    return " ".join(words)


def keywords(text: str, lang: str, limit: int = 8) -> list[str]:
    found: list[str] = []
    cue_words = _cue_words()
    for candidate in _candidates(text, lang, limit):
        term = clean(candidate)
        if (
            2 <= len(term) <= 64
            and term not in found
            and term not in cue_words
            and not _DIGITS.fullmatch(term)
            and not _CJK_COUNT.match(term)
        ):
            found.append(term)
            if len(found) >= limit:
                break
    return found


def _names(text: str) -> list[str]:
    return [name for name in _NAME_IN_TEXT.findall(text) if name.lower() not in _NOT_NAMES][:MAX_NAMES]


def _candidates(text: str, lang: str, limit: int) -> list[str]:
    segmenter = _SEGMENTERS.get(lang)
    if segmenter is None:
        return _names(text) + _yake_terms(text, lang)
    # Chinese or Japanese with English product names in it: the segmenter's terms for the CJK part, YAKE's
    # for the Latin part (a segmenter returns English words one by one, stop words included), alternating.
    native = [term for term in segmenter(text, limit) if _CJK.search(term) or _PRODUCT_NAME.match(term)]
    latin = _yake_terms(_CJK_RUNS.sub(". ", text), "en") if len(_LATIN_WORDS.findall(text)) >= 3 else []
    return _cjk_names(text) + [term for pair in zip_longest(native, latin) for term in pair if term]


def _cjk_names(text: str) -> list[str]:
    """The Latin names in Chinese or Japanese text, in order, at most MAX_NAMES (not DM, USD, or a stop word)."""
    names: list[str] = []
    for word in _LATIN_IN_CJK.findall(text):
        lowered = word.lower()
        if lowered not in _NOT_NAMES and lowered not in stop_words() and lowered not in names:
            names.append(lowered)
    return names[:MAX_NAMES]


def _yake_terms(text: str, lang: str) -> list[str]:
    extractor = _yake(lang if lang in _YAKE_LANGS else "en")
    with _YAKE_LOCK:  # extractors keep an unsynchronised similarity cache; CPU-bound anyway (GIL)
        scored = extractor.extract_keywords(text)
    return [term for term, _score in sorted(scored, key=lambda pair: (pair[1], pair[0]))]
