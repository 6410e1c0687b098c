"""The category rules of the local safety check, read from data/safety_lexicon.json and run on the folded text
(pipeline.llm.local.normalise): a category's phrase alone, or one of its terms with a cue near it.

A cue pairs with a term only when neither overlaps the other and no defusing word (news, prevention,
research, ...) is in the same window, neither one of the lexicon's words nor one of the category's own (a process
for "kill", a licence for "rifle"); the hard rule (a minor with a sexual or grooming cue) is never defused, and
neither is a match right next to a first-person offer ("I sell", 出售, 売ります): a defusing word elsewhere in the
post does not turn an offer into a report.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import regex

from pipeline.llm.local.normalise import fold

SAFETY_LEXICON_PATH = Path(__file__).resolve().parent / "data" / "safety_lexicon.json"
_INFLECTIONS = r"(?:s|es|ed|d|ing|er|ers)?"
HARD_RULE = "minors"
# Characters after an offered match in which a defusing word still speaks for it (杀猪盘识别: the spotting of one).
OFFER_TAIL = 6


@dataclass(frozen=True)
class Category:
    name: str
    flag: str
    phrases: regex.Pattern[str]
    terms: regex.Pattern[str]
    cues: tuple[str, ...]
    # Its terms are everyday words (kids, 高校生): alone they are no evidence, not even for the classifier.
    everyday_terms: bool
    # Words that defuse this category's matches only, besides the lexicon's defusing words: the benign setting its
    # words have (a process or a server for "kill", a licence or a hunting season for "rifle"). None: no such words.
    defusers: regex.Pattern[str] | None


@dataclass(frozen=True)
class RuleHit:
    """One category that fired, how (phrase, combination or the hard rule) and whether only a bare term matched."""

    category: str
    flag: str
    kind: str


_WORD_EDGE = r"(?<![\p{Latin}\p{N}])"


def _term_pattern(term: str) -> str:
    """One term's pattern, without its left word edge (compile_terms puts one before all the words)."""
    if term.endswith("*"):
        return str(regex.escape(term[:-1])) + r"[\p{L}\p{N}]*"
    if term[-1:].isascii() and term[-1:].isalnum():
        return str(regex.escape(term)) + _INFLECTIONS + r"(?![\p{Latin}\p{N}])"
    return str(regex.escape(term))


def compile_terms(terms: list[str]) -> regex.Pattern[str]:
    """One matcher for a list of terms (English ones as words with inflections; CJK ones anywhere), each folded as
    the text is (a term with a digit beside a letter, "16yo", "track1", "0day", reads as leetspeak there). Terms
    that start with a Latin letter or a digit share one left word edge (against Latin letters and digits only:
    "出租ddos" holds the word "ddos", CJK has no spaces), checked once per position rather than once per term; a
    word and a CJK term never start with the same character, so the grouping changes no match."""
    ordered = sorted({fold(term) for term in terms}, key=len, reverse=True)
    words = [_term_pattern(term) for term in ordered if term[:1].isascii() and term[:1].isalnum()]
    others = [_term_pattern(term) for term in ordered if not (term[:1].isascii() and term[:1].isalnum())]
    groups = ([_WORD_EDGE + "(?:" + "|".join(words) + ")"] if words else []) + others
    return regex.compile("|".join(groups) or r"(?!x)x")


@functools.cache
def safety_lexicon() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SAFETY_LEXICON_PATH.read_text(encoding="utf-8"))
    return data


@functools.cache
def _categories() -> tuple[Category, ...]:
    return tuple(
        Category(
            name,
            spec["flag"],
            compile_terms(spec["phrases"]),
            compile_terms(spec["terms"]),
            tuple(spec["cues"]),
            bool(spec.get("everyday_terms", False)),
            compile_terms(spec["defusers"]) if spec.get("defusers") else None,
        )
        for name, spec in safety_lexicon()["categories"].items()
    )


@functools.cache
def _group(name: str) -> regex.Pattern[str]:
    lexicon = safety_lexicon()
    terms = lexicon["cues"][name] if name in lexicon["cues"] else lexicon[name]
    return compile_terms(terms)


def _spans(pattern: regex.Pattern[str], text: str) -> list[tuple[int, int]]:
    return [match.span() for match in pattern.finditer(text)]


def _near(left: list[tuple[int, int]], right: list[tuple[int, int]], window: int) -> list[tuple[int, int]]:
    """The windows where a span of `left` and a distinct, non-overlapping span of `right` lie within `window`."""
    found = []
    for start, end in left:
        for other_start, other_end in right:
            apart = other_end <= start or other_start >= end
            if apart and max(end, other_end) - min(start, other_start) <= window:
                found.append((min(start, other_start), max(end, other_end)))
    return found


def without_benign(folded: str) -> str:
    """The folded text with idioms removed ("kill the process", "this deal is a bomb")."""
    return str(_group("benign").sub(" ", folded))


# A defusing word that is refused is no defuser: "no hotlines", "don't send me to a crisis line", "不要心理咨询",
# "相談窓口なし", "licence not needed". An English refusal stands up to four words before the defuser, in the same
# clause, or right after it ("not needed"); a Chinese or Japanese one right before it (不要/别/不用/没有) or right after
# it (相談しない, なし).
_REFUSED_BEFORE = regex.compile(
    r"(?:\b(?:no|not|without|never|skip|forget|don'?t|do not|won'?t)\s+(?:[\p{L}'-]+\s+){0,4}"
    r"|(?:不要|别|不用|不许|没有))$"
)
_REFUSED_AFTER = regex.compile(
    r"^(?:(?:には|に|は)?(?:言わない|相談しない|行かない|なし|無し|不要)"
    r"|s?\s+(?:not (?:needed|required)|needed\?? no|unnecessary|optional)"
    # Evasion, not defence: "avoid detection", "avoid the cops", 防止跑路 (keeping victims from running),
    # ウイルス対策ソフトに検知されない / 対策ソフト回避 (antivirus that does not see it).
    r"|\s+(?:detection|the cops|cops|the police|police|customs|getting caught|being caught)"
    r"|(?:跑路|逃跑|报警|举报)"
    r"|(?:ソフト)?(?:に|を)?(?:検知|検出)?(?:されない|されず|回避|すり抜け|に引っかからない))"
)
# A detection or defence word that the post sets out to get past is no defuser either: "must pass Defender",
# "bypasses detection", "evades EDR protection", ポリ対策 (measures against the police), 税関対策.
_EVADED_BEFORE = regex.compile(
    r"(?:\b(?:avoid\w*|bypass\w*|evad\w*|pass|passes|beats?|dodg\w*|undetected by|gets? past|slips? past|fool\w*)"
    r"\s+(?:[\p{L}'-]+\s+){0,2}|(?:ポリ|サツ|警察|税関|マトリ))$"
)
_DETECTION = regex.compile(r"^(?:defen[cds]\w*|detect\w*|protect\w*|security team|検知|検出|対策|防御)")
# Posing as the defender: "calling as their 'bank security team'", 冒充 ... 反诈中心.
_POSING_BEFORE = regex.compile(
    r"(?:\b(?:as their|posing as|pose as|pretend(?:ing)? to be|impersonat\w*)\s+['\"‘“]?(?:[\p{L}'-]+\s+){0,2}"
    r"|(?:冒充|假扮|装作|を装って|のふりをして))['\"‘“]?$"
)


def _unrefused(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The defusing words' spans without those the text refuses ("no hotlines, serious only")."""
    return [
        (start, end)
        for start, end in spans
        if not _REFUSED_BEFORE.search(text[max(0, start - 30) : start])
        and not _REFUSED_AFTER.match(text[end:])
        and not _evaded(text, start)
    ]


def _evaded(text: str, start: int) -> bool:
    """Whether the detection or defence word at `start` is one the post gets past or poses as ("must pass Defender",
    ポリ対策, "calling as their bank security team")."""
    before = text[max(0, start - 30) : start]
    return bool(_POSING_BEFORE.search(before)) or (
        bool(_DETECTION.match(text[start:])) and bool(_EVADED_BEFORE.search(before))
    )


def _defusers(text: str, category: Category | None = None) -> list[tuple[int, int]]:
    """The defusing words' spans (the lexicon's, and the category's own), without those the text refuses."""
    spans = _spans(_group("defusers"), text)
    if category is not None and category.defusers is not None:
        spans += _spans(category.defusers, text)
    return _unrefused(text, spans)


def _defused(spans: list[tuple[int, int]], window: int, defusers: list[tuple[int, int]]) -> bool:
    return all(
        any(abs(d_start - start) <= window or abs(d_end - end) <= window for d_start, d_end in defusers)
        for start, end in spans
    )


def _offered(text: str, spans: list[tuple[int, int]], defusers: list[tuple[int, int]]) -> bool:
    """Whether a first-person offer ("I sell", "we're hiring", 本人出售, 売ります: the `offer` cues) stands right
    before or after one of the spans, within the lexicon's `offer_gap` characters, with no defusing word between the
    two or right after the match: the post offers the thing, and a defusing word elsewhere ("News for the crew: I
    sell pipe bomb kits") does not make it a report. One in between or right after still counts ("I sell
    courses on spotting mule ads", 本人提供杀猪盘识别培训)."""
    gap = int(safety_lexicon()["offer_gap"])
    offers = _spans(_group("offer"), text)
    for start, end in spans:
        for o_start, o_end in offers:
            stretch = (min(o_start, start), max(o_end, end) + OFFER_TAIL)
            beside = o_end >= start - gap and o_start <= end + gap
            if beside and not any(d_end > stretch[0] and d_start < stretch[1] for d_start, d_end in defusers):
                return True
    return False


def defused(folded: str) -> bool:
    """Whether the text says it reports, prevents, researches or supports (news, prevention, hotline, ...), or
    names one of a category's words in that category's benign setting (kill and a process)."""
    text = without_benign(folded)
    if _defusers(text):
        return True
    # The category's own words first: few texts have any, and the category's terms and phrases cost more to seek.
    return any(
        category.defusers is not None
        and category.defusers.search(text) is not None
        and (category.terms.search(text) or category.phrases.search(text))
        and _unrefused(text, _spans(category.defusers, text))
        for category in _categories()
    )


def rule_hits(folded: str) -> list[RuleHit]:
    """Every category that fires on a folded text, the hard rule first."""
    text = without_benign(folded)
    window = int(safety_lexicon()["window"])
    found: list[RuleHit] = []
    minors = _spans(_group("minor"), text)
    if _near(minors, _spans(_group("sexual"), text) + _spans(_group("grooming"), text), window):
        found.append(RuleHit(HARD_RULE, "child_safety", "hard_rule"))
    for category in _categories():
        phrases = _spans(category.phrases, text)
        if phrases:
            # A phrase next to a defusing word (a course on spotting mule ads, a report on a scam ring) is
            # evidence for the classifier, not a verdict.
            # A first-person offer next to the phrase stands whatever else the post says.
            defusers = _defusers(text, category)
            defused_phrase = _defused(phrases, window, defusers) and not _offered(text, phrases, defusers)
            kind = "term" if defused_phrase else "phrase"
            found.append(RuleHit(category.name, category.flag, kind))
            continue
        terms = _spans(category.terms, text)
        if not terms:
            continue
        paired = [span for cue in category.cues for span in _near(terms, _spans(_group(cue), text), window)]
        defusers = _defusers(text, category) if paired else []
        if paired and (not _defused(paired, window, defusers) or _offered(text, paired, defusers)):
            found.append(RuleHit(category.name, category.flag, "combination"))
        elif not category.everyday_terms:
            found.append(RuleHit(category.name, category.flag, "term"))
    return found
