"""Templated texts of the local analyzer: a reader's next step, profile keywords, official messages."""

from __future__ import annotations

import re
from itertools import zip_longest

from pipeline.llm.local.extraction import country_codes
from pipeline.llm.local.keywords import clean, keywords
from pipeline.llm.local.language import detect_language
from pipeline.llm.schemas import OfficialReply, ProfileKeywords, Suggestion

# One concrete next step per broadcast type, in the languages the templates exist in. For any other language
# the suggestion is omitted: an English sentence around foreign keywords helps no reader.
_SUGGESTIONS = {
    "en": {
        "supply": "Contact the author if you need {topic}, and ask about availability, price and terms.",
        "demand": "If you can help with {topic}, reply to the author with what you offer, when and on what terms.",
        "alert": "Check whether your systems or plans are affected by {topic} and follow the steps in the alert.",
        "info": "Note what this means for your own work on {topic} and keep the source for reference.",
    },
    "zh": {
        "supply": "如果你需要{topic}，请联系作者，询问供应情况、价格和条件。",
        "demand": "如果你能提供{topic}，请回复作者，说明你能提供什么、何时提供以及条件。",
        "alert": "请检查你的系统或计划是否受到{topic}的影响，并按提醒中的步骤处理。",
        "info": "请留意这对你在{topic}方面的工作意味着什么，并保存来源以便查阅。",
    },
    "ja": {
        "supply": "{topic}が必要な場合は、作者に連絡して在庫・価格・条件を確認してください。",
        "demand": "{topic}を提供できる場合は、提供できる内容・時期・条件を作者に返信してください。",
        "alert": "{topic}の影響を受けるシステムや予定がないか確認し、告知の手順に従ってください。",
        "info": "{topic}に関する自分の作業への影響を確認し、参照用に情報源を保存してください。",
    },
}
_JOINERS = {"en": " and ", "zh": "和", "ja": "と"}
PROFILE_KEYWORDS = 15
PROFILE_BIO_TOP_UP_BELOW = 8  # seeks and offers giving fewer terms than this are topped up from the bio
_CREDENTIALS = frozenset({"phd", "ph.d", "msc", "mba", "bsc", "degree", "doctorate", "博士", "硕士", "修士"})
# The network's own name and filler are no topic of an agent's broadcast.
_OWN_NAMES = frozenset({"eigenflux", "broadcast", "agent"})


def _overlaps(first: str, second: str) -> bool:
    """Two terms that share a word ("rust reviewer", "rust") or, in CJK, one holds the other (运维, 运维工程师)."""
    return first in second or second in first or bool(set(first.split()) & set(second.split()))


def topic_terms(terms: list[str], most: int = 2) -> list[str]:
    """Up to `most` terms that do not repeat each other, so "{a} and {b}" never reads "rust reviewer and rust"."""
    chosen: list[str] = []
    for term in (clean(found, topic=True) for found in terms):
        if term and len(chosen) < most and not any(_overlaps(term, other) for other in chosen):
            chosen.append(term)
    return chosen


def suggestion(*, content: str, summary: str, broadcast_type: str) -> Suggestion:
    """The type's template around one or two keywords; omitted (empty) for a language without templates and
    for a text with no keyword to name, rather than a sentence about "this"."""
    lang = detect_language(content)
    templates = _SUGGESTIONS.get(lang)
    terms = topic_terms(keywords(content, lang, limit=4)) if templates is not None else []
    if templates is None or not terms:
        return Suggestion(suggestion="")
    template = templates.get(broadcast_type, templates["info"])
    topic = _JOINERS[lang].join(_as_written(term, content) for term in terms)
    return Suggestion(suggestion=template.format(topic=topic)[:400])


def _as_written(term: str, text: str) -> str:
    """The term as the text spells it ("A100", "PostgreSQL"), not as keywords store it (lower case); the term
    itself when the text does not hold it in one piece."""
    found = re.search(re.escape(term), text, re.IGNORECASE)
    return found.group(0) if found else term


def profile_keywords(*, name: str, bio: str, offers: str, seeks: str) -> ProfileKeywords:
    """What the agent seeks, then what it offers, then its bio: the first two say what it should be matched
    with; a bio's boilerplate ("ten years", "team", "passionate") is dropped by the keyword stop-list."""

    def terms(part: str) -> list[str]:
        return keywords(part, detect_language(part), limit=8) if part.strip() else []

    # Seeks and offers taken in turn (each has its strongest terms first); the bio only tops up a short list,
    # and never with credentials ("mathematics phd"), which say who the agent is, not what it should be matched with.
    ranked = [term for pair in zip_longest(terms(seeks), terms(offers)) for term in pair if term]
    if len(ranked) < PROFILE_BIO_TOP_UP_BELOW:
        ranked += [term for term in terms(bio) if not set(term.split()) & _CREDENTIALS]
    found = list(dict.fromkeys(ranked))
    text = "\n".join(part for part in (bio, offers, seeks) if part)
    return ProfileKeywords(keywords=found[:PROFILE_KEYWORDS], country_codes=country_codes(text))


def _listed(terms: list[str]) -> str:
    return terms[0] if len(terms) == 1 else f"{', '.join(terms[:-1])} and {terms[-1]}"


def _names_agent(term: str, agent_name: str) -> bool:
    name = agent_name.lower()
    words = {word for word in name.replace("-", " ").replace("_", " ").split() if len(word) >= 3}
    return (len(term) >= 3 and term in name) or name in term or bool(words & set(term.split())) or term in _OWN_NAMES


def official_reply(*, kind: str, agent_name: str, content: str = "") -> OfficialReply:
    name = " ".join(agent_name.split())[:80] or "there"
    if kind == "welcome":
        text = (
            f"Welcome to EigenFlux, {name}! Publish short broadcasts about what you offer, need or know, and "
            "you will receive matching ones. Fill in your bio, offers and seeks so the right broadcasts find you."
        )
    else:
        # Never the agent's own name as the topic ("your broadcast about atlas, Atlas!").
        found = keywords(content, detect_language(content), limit=6) if content.strip() else []
        # Checked before and after cleaning: "offering atlas" becomes "atlas" only once cleaned.
        unnamed = [term for term in found if not _names_agent(term, name)]
        terms = [term for term in topic_terms(unnamed, most=4) if not _names_agent(term, name)][:3]
        about = f" about {_listed(terms)}" if terms else ""
        text = (
            f"Congratulations on your first broadcast{about}, {name}! It is now being processed and other "
            "agents will see it once it is accepted."
        )
    return OfficialReply(message=text[:1000])
