"""Rule-based extraction answering the process_item schema (docs/model-layer.md#the-local-analyzer).

Order: discard heuristics (malicious patterns, runtime logs, error pages, gibberish/unfilled templates,
spam), then the fields: lead-sentence summary, keywords (YAKE for spaced languages; jieba for Chinese, Janome
for Japanese: pipeline.llm.local.segmentation), domain lexicon (English, Chinese and Japanese terms), broadcast
type cue words, language, quality heuristic, timeliness, geo, source type, expected response, expire time.
"""

from __future__ import annotations

import re

import regex

from pipeline.llm.local.hashing import cjk_share
from pipeline.llm.local.hints import with_author_hints
from pipeline.llm.local.keywords import keywords
from pipeline.llm.local.language import detect_language
from pipeline.llm.local.lexicon import hits, lexicon
from pipeline.llm.local.quality import is_bait_spam, quality_score, quality_signals
from pipeline.llm.local.safety import matched_flags
from pipeline.llm.local.types import broadcast_type
from pipeline.llm.schemas import Extraction

_I = re.IGNORECASE
_LOG_LINE = (
    re.compile(r"^\s*\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}"),
    re.compile(r"^\s*\[?\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]?\s"),
    re.compile(r"(?:^|[\s\[|])(?:DEBUG|INFO|WARN|WARNING|ERROR|TRACE|FATAL|CRITICAL)(?:[:\]\s|]|$)"),
    re.compile(r"^\s*Traceback \(most recent call last\)"),
    re.compile(r'^\s*File "[^"]+", line \d+'),
    re.compile(r"^\s*at [\w.$<>]+\(.*\)\s*$"),
    re.compile(r"^\s*[\w.]*(?:Error|Exception):\s"),
    re.compile(r"\b(?:tool_call|function_call|tool call|observation:|thought:|action input:|action:)", _I),
    re.compile(r"\bstep \d+/\d+\b", _I),
    re.compile(r"\b(?:batch|chunk|page|epoch|iteration|shard) \d+ (?:of|/) \d+\b", _I),
    re.compile(r"\bexit(?:ed)? (?:code|status|with code) -?\d+", _I),
    re.compile(r"\b(?:pid|tid|thread)[ =:#]\d+", _I),
    re.compile(r"^\s*\$ [\w./-]+"),
    re.compile(r"\bretrying in \d+(?:\.\d+)?\s*(?:s|ms|seconds)\b", _I),
    re.compile(
        r"\b(?:heartbeat|checkpoint saved|task (?:started|finished|completed)|job \w+ (?:started|finished))\b", _I
    ),
    re.compile(r"\b\w+=\S+(?:\s+\w+=\S+){2,}"),  # key=value key=value key=value
)
_WORD = regex.compile(r"[\p{L}\p{M}']+")
_LATIN_WORD = regex.compile(r"^[\p{Latin}']+$")
_VOWELS = set("aeiouyàáâäãåèéêëìíîïòóôöõùúûüýÿæœ")
_CAPITALS = regex.compile(r"\p{Lu}.*\p{Lu}")
_CONSONANT_RUN = re.compile(r"[bcdfghjklmnpqrstvwxz]{5,}", _I)
_REPEAT = re.compile(r"(.)\1{5,}")
_SENTENCE_END = regex.compile(r"(?<=[.!?])\s+|(?<=[\u3002\uff01\uff1f])|\n+")  # CJK full stops need no space
_URL = re.compile(r"https?://\S+", _I)
_EMOJI = regex.compile(r"\p{Extended_Pictographic}")
_DIGITS = re.compile(r"\d")
_ISO_DATE = re.compile(
    r"\b(?:until|by|before|expires?|deadline|through|till|ends?)\b[^\n\d]{0,12}(\d{4}-\d{2}-\d{2})", _I
)
_BREAKING = re.compile(
    r"\b(?:right now|currently|ongoing|just now|as of now|minutes ago|since \d|in progress|live)\b", _I
)
_TIMELY = re.compile(
    r"\b(?:today|tonight|tomorrow|this (?:week|weekend|month|friday|monday)|next (?:week|month)|deadline|until|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|may|june|july|"
    r"august|september|october|november|december|q[1-4]|\d{4}-\d{2}-\d{2})\b",
    _I,
)
_FORWARDED = re.compile(
    r"^\s*(?:rt|fwd?|fw)\b[:\s]|\b(?:forwarded|reposting|repost|via @\w+|shared from|cross-?post)\b", _I
)
_CURATED = re.compile(r"\b(?:according to|reports?|reported|roundup|summary of|read more|article|paper|via)\b", _I)
_FEEDBACK = re.compile(r"\b(?:feedback|thoughts\?|opinions?|what do you think|reviews? welcome)\b", _I)
MAX_DOMAINS = 3  # the strongest few: a broadcast is about one or two things


def lead_sentence(text: str, limit: int = 200) -> str:
    for part in _SENTENCE_END.split(text.strip()):
        sentence = " ".join(part.split())
        if sentence:
            break
    else:
        return ""
    if len(sentence) <= limit:
        return sentence
    cut = sentence[: limit - 1].rsplit(" ", 1)[0]
    return cut + "…"


def is_runtime_log(text: str) -> bool:
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return False
    matching = sum(1 for line in lines if any(pattern.search(line) for pattern in _LOG_LINE))
    if len(lines) == 1:
        return sum(1 for pattern in _LOG_LINE if pattern.search(lines[0])) >= 2
    return matching / len(lines) >= 0.5


def _acronym(word: str) -> bool:
    """An acronym (all capitals, at most five letters: GPU, HNSW) or a short product name with capitals inside and
    a vowel (NVLink, NVMe); "sdfGHk" is neither."""
    if len(word) > 6 or _CAPITALS.search(word) is None:
        return False
    return (word.isupper() and len(word) <= 5) or any(char in _VOWELS for char in word.lower())


def is_gibberish(text: str) -> bool:
    """Keyboard mashing, random strings, or an unfilled template."""
    if hits("template_markers", text):
        return True
    words = _WORD.findall(text)
    letters = sum(len(word) for word in words)
    if letters < 3 or _REPEAT.search(text.replace(" ", "")):
        return True
    # Mostly CJK prose: its Latin words are names and acronyms (RTX, HNSW, Qdrant, pgvector), not typing.
    if cjk_share(text) >= 0.5:
        return False
    # Acronyms and product names (GPU, QPS, NVLink) are not mashing either, unless they are most of the Latin words.
    candidates = [word for word in words if _LATIN_WORD.match(word) and len(word) >= 3]
    plain = [word for word in candidates if not _acronym(word)]
    latin = [word.lower() for word in (plain if 2 * len(plain) >= len(candidates) else candidates)]
    if len(latin) < 3:
        return False
    weird = 0
    for word in latin:
        vowels = sum(1 for char in word if char in _VOWELS)
        if vowels == 0 or _CONSONANT_RUN.search(word) or len(word) > 18 or vowels / len(word) < 0.2:
            weird += 1
    return weird / len(latin) >= 0.4


def spam_score(text: str) -> float:
    score = float(len(set(hits("spam_terms", text))))
    if len(_URL.findall(text)) >= 3:
        score += 1
    if text.count("!") >= 3:
        score += 1
    if len(_EMOJI.findall(text)) >= 4:
        score += 1
    if "$$" in text or "€€" in text:
        score += 1
    letters = [char for char in text if char.isalpha()]
    if len(letters) >= 20 and sum(char.isupper() for char in letters) / len(letters) > 0.5:
        score += 1
    return score


def discard_reason(content: str, notes: str, url: str, signals: dict[str, float]) -> str:
    """The discard verdict; spam is the lexicon's spam terms and shouting, or a post made of bait: the content's
    quality signals (pipeline.llm.local.quality), computed once by the caller, which scores with them too."""
    flags = matched_flags("\n".join((content, notes, url)))
    if flags & {"prompt_injection", "malware", "phishing", "fraud"}:
        return "malicious"
    if is_runtime_log(content):
        return "runtime_log"
    if hits("error_page_terms", content) and len(content) < 600:
        return "error_page"
    if is_gibberish(content):
        return "gibberish"
    if spam_score(content) >= 2 or is_bait_spam(signals):
        return "spam"
    return ""


def domains(text: str) -> list[str]:
    counts = {name: len(hits("domains", text, name)) for name in lexicon()["domains"]}
    ranked = sorted((name for name, count in counts.items() if count), key=lambda name: (-counts[name], name))
    return ranked[:MAX_DOMAINS]


def timeliness(text: str, kind: str) -> str:
    if kind == "alert" and _BREAKING.search(text):
        return "breaking"
    if kind == "alert" or _TIMELY.search(text):
        return "timely"
    return "evergreen"


def geo(text: str) -> str:
    for _code, names in lexicon()["countries"].items():
        for term in names:
            if len(term) > 2 and re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text, _I):
                return str(term).title()
    return ""


def country_codes(text: str) -> list[str]:
    codes = []
    for code, names in lexicon()["countries"].items():
        if any(re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text, _I) for term in names):
            codes.append(code)
    return codes


def source_type(text: str, url: str) -> str:
    if _FORWARDED.search(text):
        return "forwarded"
    if url and _CURATED.search(text):
        return "curated"
    return "original"


def expected_response(text: str, kind: str) -> str:
    if kind == "demand":
        return "offer"
    if kind == "supply":
        return "contact"
    if _FEEDBACK.search(text):
        return "feedback"
    if "?" in text:
        return "answer"
    return "no_reply"


def expire_time(text: str) -> str:
    match = _ISO_DATE.search(text)
    return f"{match.group(1)}T23:59:59+00:00" if match else ""


@with_author_hints  # the author's JSON notes: taken where the content agrees (pipeline.llm.local.hints)
def extract(*, content: str, notes: str = "", url: str = "") -> Extraction:
    # Notes are the author's alone: they may get an item discarded (an injection hidden there), but no word of
    # them may reach a field other agents read or search (docs/enrichment.md#notes-stay-private).
    lang = detect_language(content)
    found_domains = domains("\n".join((content, url)))
    signals = quality_signals(content, url, len(found_domains))
    reason = discard_reason(content, notes, url, signals)
    kind = broadcast_type(content)
    terms = [] if reason in {"gibberish", "runtime_log"} else keywords(content, lang)
    if not reason:
        for filler in (*found_domains, kind):  # a kept item needs at least three keywords
            if len(terms) >= 3:
                break
            if filler not in terms:
                terms.append(filler)
        for filler in ("broadcast", f"{kind} broadcast", "eigenflux"):
            if len(terms) < 3 and filler not in terms:
                terms.append(filler)
    expiry = expire_time(content)
    return Extraction.model_validate(
        {
            "discard": bool(reason),
            "discard_reason": reason,
            "summary": lead_sentence(content),
            "keywords": terms[:8],
            "domains": found_domains,
            "broadcast_type": kind,
            "lang": lang,
            "quality": 0.05 if reason else quality_score(signals),
            "timeliness": timeliness(content, kind),
            "geo": geo(content),
            "source_type": source_type(content, url),
            "expected_response": expected_response(content, kind),
            "expire_time": expiry,
        }
    )
