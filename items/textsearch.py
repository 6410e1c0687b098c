"""Full-text analysis shared by the search vector (writes) and keyword queries (reads).

Latin and other spaced scripts go through PostgreSQL's `english` configuration (stemming, stop words).
Han, Hiragana, Katakana and Hangul have no spaces between words, so each run of them is indexed as
overlapping character bigrams, as Elasticsearch's `cjk` analyzer does ("上海市" -> "上海 海市"), and queries
are cut the same way: any two-character (or longer) substring of an item is found. Both sides are
NFKC-normalised first, so full-width Latin and half-width katakana match their usual forms.

Which items a plain query matches (the keyword bar): every term when it has one or two, otherwise at
least two thirds of them, like a search engine's "minimum should match". A query written with web-search
operators (quotes for a phrase, `or`, `-` to exclude) is taken literally instead.

Changing anything here changes what is stored: write a migration that re-indexes (see 0008).
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass
from itertools import combinations

import regex
from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db import connection
from django.db.models import Value

TEXT_SEARCH_CONFIG = "english"
# The prolonged sound mark (ー) and iteration marks belong to words but are not Han/Kana by script.
_CJK_RUN = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}ー々〆ヶゝゞヽヾ]+")
# Field weights: extracted keywords rank above the summary, which ranks above the rest of the text.
KEYWORDS_WEIGHT, SUMMARY_WEIGHT, CONTENT_WEIGHT = "A", "B", "C"
# ts_rank_cd's weights for D, C, B, A (PostgreSQL's defaults).
RANK_WEIGHTS = [0.1, 0.2, 0.4, 1.0]
MIN_MATCH = 2 / 3  # share of a longer plain query's terms an item must contain
# "k of n terms" becomes an OR of k-term conjunctions, which the GIN index answers directly; past this many
# conjunctions a longer query asks for more of its terms instead.
MAX_CONJUNCTIONS = 64
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


def keyword_query(q: str) -> KeywordQuery | None:
    """The keyword bar and ranking query for a search, or None when the query has no searchable term (only
    stop words or punctuation)."""
    if _OPERATORS.search(q):
        literal = SearchQuery(query_text(q), search_type="websearch", config=TEXT_SEARCH_CONFIG)
        return KeywordQuery(match=literal, rank=literal, terms=())
    terms = query_terms(q)
    if not terms:
        return None
    needed = len(terms) if len(terms) <= 2 else math.ceil(MIN_MATCH * len(terms))
    while math.comb(len(terms), needed) > MAX_CONJUNCTIONS:
        needed += 1
    quoted = [_quote(term) for term in terms]
    match = " | ".join("(" + " & ".join(group) + ")" for group in combinations(quoted, needed))
    # The terms are already normalised lexemes: the `simple` configuration passes them through unchanged.
    return KeywordQuery(
        match=SearchQuery(match, search_type="raw", config="simple"),
        rank=SearchQuery(" | ".join(quoted), search_type="raw", config="simple"),
        terms=tuple(terms),
    )


def query_terms(q: str) -> list[str]:
    """The query's distinct lexemes in order of appearance, analysed as item text is (stems, bigrams)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT lexeme FROM unnest(to_tsvector(%s::regconfig, %s)) ORDER BY positions[1]",
            [TEXT_SEARCH_CONFIG, index_text(q)],
        )
        return [row[0] for row in cursor.fetchall()]


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def search_vector(*, summary: str, keywords: list[str], content: str) -> SearchVector:
    """The stored, weighted search vector of a completed item (an expression for an UPDATE)."""

    def part(text: str, weight: str) -> SearchVector:
        return SearchVector(Value(index_text(text)), weight=weight, config=TEXT_SEARCH_CONFIG)

    return part(" ".join(keywords), KEYWORDS_WEIGHT) + part(summary, SUMMARY_WEIGHT) + part(content, CONTENT_WEIGHT)


def search_vector_sql() -> str:
    """The vector search_vector() builds, as SQL over three parameters (search_vector_params) for bulk writes."""
    return " || ".join(
        f"setweight(to_tsvector('{TEXT_SEARCH_CONFIG}', %s), '{weight}')"
        for weight in (KEYWORDS_WEIGHT, SUMMARY_WEIGHT, CONTENT_WEIGHT)
    )


def search_vector_params(*, summary: str, keywords: list[str], content: str) -> list[str]:
    return [index_text(" ".join(keywords)), index_text(summary), index_text(content)]
