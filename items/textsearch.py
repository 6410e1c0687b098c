"""Full-text analysis shared by the search vector (writes) and keyword queries (reads).

Latin and other spaced scripts go through PostgreSQL's `english` configuration (stemming, stop words).
Han, Hiragana, Katakana and Hangul have no spaces between words, so each run of them is indexed as
overlapping character bigrams, as Elasticsearch's `cjk` analyzer does ("上海市" -> "上海 海市"), and queries
are cut the same way: any two-character (or longer) substring of an item is found. Both sides are
NFKC-normalised first, so full-width Latin and half-width katakana match their usual forms.

Which items a plain query matches (the keyword bar): every term when it has one or two, otherwise at
least two thirds of them, like a search engine's "minimum should match". A query's terms are words, phrases
of the search lexicon (data/search_lexicon.json) and, in Chinese, jieba's words; a term found in the lexicon
also matches the other terms of its group (the same thing in another language), so 显卡 finds "GPU".
A query written with web-search operators (quotes for a phrase, `or`, `-` to exclude) is taken literally
instead.

Changing how item text is indexed (index_text, search_vector) changes what is stored: write a migration
that re-indexes (see 0010). Query analysis and the lexicon apply to queries only.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import threading
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import regex
from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db import connection
from django.db.models import Value

from eigenflux.base.longlived import loaded_once

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.models.expressions import CombinedExpression
    from django.db.models.sql.compiler import SQLCompiler, _AsSqlType

TEXT_SEARCH_CONFIG = "english"
# The prolonged sound mark (ー) and iteration marks belong to words but are not Han/Kana by script.
_CJK_RUN = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}ー々〆ヶゝゞヽヾ]+")
# Field weights: extracted keywords rank above the summary, which ranks above the rest of the text.
KEYWORDS_WEIGHT, SUMMARY_WEIGHT, CONTENT_WEIGHT = "A", "B", "C"
# ts_rank_cd's weights for D, C, B, A (PostgreSQL's defaults).
RANK_WEIGHTS = [0.1, 0.2, 0.4, 1.0]
MIN_MATCH = 2 / 3  # share of a longer plain query's terms an item must contain
# "k of n terms" is what an OR of k-term conjunctions would say (written nested, _at_least), which the GIN index
# answers directly; past this many such conjunctions a longer query asks for more of its terms instead.
MAX_CONJUNCTIONS = 64
_KANA = regex.compile(r"[\p{Hiragana}\p{Katakana}]")
_WORD = regex.compile(r"[\p{L}\p{N}]+(?:[-.+#][\p{L}\p{N}]+)*[+#]*")
LEXICON_PATH = Path(__file__).resolve().parent / "data" / "search_lexicon.json"
_JIEBA_LOCK = threading.Lock()
_OPERATORS = regex.compile(r'"|(?:^|\s)-\S|(?:^|\s)or(?:\s|$)', regex.IGNORECASE)


def bigrams(run: str) -> list[str]:
    """Overlapping bigrams of a run of CJK characters; a lone character stands for itself."""
    if len(run) < 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def index_text(text: str) -> str:
    """The text as the search vector indexes it: CJK runs replaced by their bigrams, space-separated."""
    normal = unicodedata.normalize("NFKC", text)
    return _CJK_RUN.sub(lambda match: " " + " ".join(bigrams(match.group(0))) + " ", normal)


def query_text(q: str) -> str:
    """A web-search style query (quotes, `or`, `-`) with each CJK run turned into a phrase of its bigrams.

    Inside a quoted phrase the bigrams simply join that phrase; outside, a run of three or more characters
    becomes a phrase of its own, so "上海市" finds "上海市" but not an item that has "上海" and "海市" apart."""
    parts = unicodedata.normalize("NFKC", q).split('"')
    for index, part in enumerate(parts):
        quoted = index % 2 == 1

        def replace(match, quoted=quoted, part=part) -> str:
            grams = " ".join(bigrams(match.group(0)))
            # Spaces part the run from Latin neighbours ("A100显卡"), but never from a leading "-" (negation).
            lead = "" if match.start() and part[match.start() - 1] == "-" else " "
            if quoted or " " not in grams:
                return f"{lead}{grams} "
            return f'{lead}"{grams}" '

        parts[index] = _CJK_RUN.sub(replace, part)
    return '"'.join(parts)


@dataclass(frozen=True)
class KeywordQuery:
    match: SearchQuery  # which items qualify
    rank: SearchQuery  # what ts_rank_cd scores them by
    terms: tuple[str, ...]
    # The query's own words without their lexicon translations: items that use them rank first.
    own: SearchQuery | None = None


def keyword_query(q: str) -> KeywordQuery | None:
    """The keyword bar and ranking query for a search, or None when the query has no searchable term (only
    stop words or punctuation).

    A plain query is cut into terms (query_units): words, lexicon phrases, and for Chinese the words of a
    segmenter. Each term matches itself or any term of its lexicon group (another language's word for the
    same thing), a CJK term as the phrase of its bigrams. The bar is then a minimum share of the terms."""
    if _OPERATORS.search(q):
        literal = SearchQuery(query_text(q), search_type="websearch", config=TEXT_SEARCH_CONFIG)
        return KeywordQuery(match=literal, rank=literal, terms=(), own=None)
    units = query_units(q)
    alternatives = {unit: [unit, *(term for term in lexicon_group(unit) if term != unit)] for unit in units}
    compiled = _tsqueries({term for terms in alternatives.values() for term in terms})
    concepts: list[str] = []
    ranked: list[str] = []
    own: list[str] = []
    for unit in units:
        parts = list(dict.fromkeys(compiled[term] for term in alternatives[unit] if compiled.get(term)))
        if parts and (concept := "(" + " | ".join(_without_longer_phrases(parts)) + ")") not in concepts:
            concepts.append(concept)
            ranked.extend(part for part in parts if part not in ranked)
            if compiled.get(unit):
                own.append(compiled[unit])
    if not concepts:
        return None
    needed = len(concepts) if len(concepts) <= 2 else math.ceil(MIN_MATCH * len(concepts))
    while math.comb(len(concepts), needed) > MAX_CONJUNCTIONS:
        needed += 1
    match = _at_least(needed, concepts)
    return KeywordQuery(
        match=_tsquery(match),
        rank=_tsquery(" | ".join(ranked)),
        terms=tuple(units),
        own=_tsquery(" | ".join(own)) if own else None,
    )


_LEXEME = r"'(?:[^']|'')*'"
_PHRASE = regex.compile(rf"{_LEXEME}(?: <-> {_LEXEME})*")


def _without_longer_phrases(parts: list[str]) -> list[str]:
    """A concept's alternatives less those that contain another one: an item with 大语言模型 has 语言模型, and
    `api <-> 接口` has `api`. The same items match with fewer entries for the text index to scan and a smaller
    tree to test each candidate against (the LLM concept at 1M items: 55 -> 33 ms, the same 67,478 matches).
    Only plain phrases (lexemes one position apart) are compared; anything else is kept as it is."""

    def lexemes(part: str) -> tuple[str, ...] | None:
        return tuple(part.split(" <-> ")) if _PHRASE.fullmatch(part) else None

    phrases = {part: lexemes(part) for part in parts}

    def contains(longer: tuple[str, ...], shorter: tuple[str, ...]) -> bool:
        return len(shorter) < len(longer) and any(
            longer[start : start + len(shorter)] == shorter for start in range(len(longer) - len(shorter) + 1)
        )

    return [
        part
        for part, sequence in phrases.items()
        if sequence is None or not any(other is not None and contains(sequence, other) for other in phrases.values())
    ]


def _at_least(needed: int, concepts: list[str]) -> str:
    """tsquery text true when at least `needed` of `concepts` (each a parenthesised tsquery) are, written as
    (first & at least needed - 1 of the rest) | (at least needed of the rest): each concept appears fewer times than
    in the OR of every needed-sized conjunction (three of four: 9 concepts instead of 12), so the text index tests a
    smaller tree against each candidate. The same items match."""
    if not 1 <= needed <= len(concepts):
        raise ValueError(f"at least {needed} of {len(concepts)} concepts")
    if needed == 1:
        return "(" + " | ".join(concepts) + ")"
    if needed == len(concepts):
        return "(" + " & ".join(concepts) + ")"
    first, rest = concepts[0], concepts[1:]
    return f"(({first} & {_at_least(needed - 1, rest)}) | {_at_least(needed, rest)})"


def query_units(q: str) -> list[str]:
    """The query's terms, in order: lexicon phrases (longest first) and words for spaced scripts; for a CJK
    run, lexicon terms (longest match), then Chinese words from jieba, or for Japanese (kana in the query)
    the overlapping bigrams of what is left. Lower-case, NFKC-normalised, without repeats."""
    normal = unicodedata.normalize("NFKC", q).lower()
    japanese = bool(_KANA.search(normal))
    units: list[str] = []
    position = 0
    for match in _CJK_RUN.finditer(normal):
        units += _spaced_units(normal[position : match.start()])
        units += _cjk_units(match.group(0), japanese=japanese)
        position = match.end()
    units += _spaced_units(normal[position:])
    return list(dict.fromkeys(units))


def _spaced_units(text: str) -> list[str]:
    words = _WORD.findall(text)
    units, index = [], 0
    while index < len(words):
        for size in range(min(_lexicon().longest_words, len(words) - index), 0, -1):
            phrase = " ".join(words[index : index + size])
            if size == 1 or phrase in _lexicon().groups:
                units.append(phrase)
                index += size
                break
    return units


def _cjk_units(run: str, *, japanese: bool) -> list[str]:
    units: list[str] = []
    rest = ""

    def flush() -> None:
        nonlocal rest
        if rest:
            units.extend(_japanese_rest(rest) if japanese else _chinese_words(rest))
            rest = ""

    index = 0
    longest = _lexicon().longest_cjk
    while index < len(run):
        for size in range(min(longest, len(run) - index), 1, -1):
            if run[index : index + size] in _lexicon().groups:
                flush()
                units.append(run[index : index + size])
                index += size
                break
        else:
            rest += run[index]
            index += 1
    flush()
    return units


def _chinese_words(text: str) -> list[str]:
    """jieba's words of two or more characters; a stretch it leaves in single characters stays whole."""
    with _JIEBA_LOCK:
        words = [word for word in jieba_loaded().lcut(text) if len(word) >= 2]
    return words or [text]


@loaded_once("loading jieba's dictionary")
def jieba_loaded() -> ModuleType:
    """jieba with its dictionary loaded (about a second, once per process), kept out of the collector's way;
    the local analyzer's keyword extraction (pipeline.llm.local.segmentation) starts from it too."""
    import jieba

    jieba.setLogLevel(logging.WARNING)  # it logs dictionary loading to stderr at DEBUG by default
    jieba.initialize()
    loaded: ModuleType = jieba
    return loaded


def _japanese_rest(text: str) -> list[str]:
    return bigrams(text)


def lexicon_group(term: str) -> tuple[str, ...]:
    """The terms that mean the same as `term` in the search lexicon (items/data/search_lexicon.json)."""
    return _lexicon().groups.get(term, ())


@dataclass(frozen=True)
class _Lexicon:
    groups: dict[str, tuple[str, ...]]
    longest_words: int  # most words in a spaced lexicon term
    longest_cjk: int  # most characters in a CJK lexicon term


@functools.cache
def _lexicon() -> _Lexicon:
    data = json.loads(LEXICON_PATH.read_text(encoding="utf-8"))
    groups: dict[str, tuple[str, ...]] = {}
    for raw_group in data["groups"]:
        # A lone CJK character cannot match: the index holds bigrams of runs of two or more.
        group = tuple(
            dict.fromkeys(
                term
                for term in (unicodedata.normalize("NFKC", raw).lower().strip() for raw in raw_group)
                if term and not (len(term) == 1 and _CJK_RUN.fullmatch(term))
            )
        )
        for term in group:
            groups[term] = tuple(dict.fromkeys(groups.get(term, ()) + group))
    cjk = [len(term) for term in groups if _CJK_RUN.fullmatch(term)]
    words = [len(term.split()) for term in groups if not _CJK_RUN.search(term)]
    return _Lexicon(groups=groups, longest_words=max(words, default=1), longest_cjk=max(cjk, default=2))


def _tsqueries(terms: set[str]) -> dict[str, str]:
    """Each term as tsquery text, analysed as item text is: a phrase of its stems and CJK bigrams ('' for a
    term of stop words only). One round trip for all of them."""
    ordered = sorted(terms)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT term, phraseto_tsquery(%s::regconfig, analysed)::text "
            "FROM unnest(%s::text[], %s::text[]) AS t(term, analysed)",
            [TEXT_SEARCH_CONFIG, ordered, [index_text(term) for term in ordered]],
        )
        return dict(cursor.fetchall())


class _TsQuery(SearchQuery):
    """tsquery text taken as it is (a cast): to_tsquery would parse its lexemes again and split a hyphenated
    stem ('visa-fre') into a phrase that no document contains."""

    # SearchQuery.as_sql's own signature (Django's and django-stubs', which ignores the same narrowing of Func's).
    def as_sql(  # type: ignore[override]
        self,
        compiler: SQLCompiler,
        connection: BaseDatabaseWrapper,
        function: str | None = None,
        template: str | None = None,
    ) -> _AsSqlType:
        return super().as_sql(compiler, connection, function=function, template="(%(expressions)s)::tsquery")


def _tsquery(text: str) -> SearchQuery:
    return _TsQuery(text)


def search_vector(*, summary: str, keywords: list[str], content: str) -> CombinedExpression:
    """The stored, weighted search vector of a completed item (an expression for an UPDATE)."""

    def part(text: str, weight: str) -> SearchVector:
        return SearchVector(Value(index_text(text)), weight=weight, config=TEXT_SEARCH_CONFIG)

    return part(" ".join(keywords), KEYWORDS_WEIGHT) + part(summary, SUMMARY_WEIGHT) + part(content, CONTENT_WEIGHT)


def search_vector_sql(keywords: str = "%s", summary: str = "%s", content: str = "%s") -> str:
    """The vector search_vector() builds, as SQL for bulk writes: over three parameters (search_vector_params)
    by default, or over the given SQL expressions holding index_text()s (columns of a staging table)."""
    return " || ".join(
        f"setweight(to_tsvector('{TEXT_SEARCH_CONFIG}', {text}), '{weight}')"
        for text, weight in ((keywords, KEYWORDS_WEIGHT), (summary, SUMMARY_WEIGHT), (content, CONTENT_WEIGHT))
    )


def search_vector_params(*, summary: str, keywords: list[str], content: str) -> list[str]:
    return [index_text(" ".join(keywords)), index_text(summary), index_text(content)]
