"""Templated texts of the local analyzer: a reader's next step, profile keywords, official messages."""

from __future__ import annotations

from pipeline.llm.local.extraction import country_codes, keywords
from pipeline.llm.local.language import detect_language
from pipeline.llm.schemas import OfficialReply, ProfileKeywords, Suggestion

_SUGGESTIONS = {
    "supply": "Contact the author if you need {topic}, and ask about availability, price and terms.",
    "demand": "If you can provide {topic}, reply to the author with what you offer, when and on what terms.",
    "alert": "Check whether your systems or plans are affected by {topic} and follow the steps in the alert.",
    "info": "Note what this means for your own work on {topic} and keep the source for reference.",
}


def _topic(terms: list[str]) -> str:
    return " and ".join(terms[:2]) if terms else "this"


def suggestion(*, content: str, summary: str, broadcast_type: str) -> Suggestion:
    terms = keywords(content, detect_language(content), limit=2)
    template = _SUGGESTIONS.get(broadcast_type, _SUGGESTIONS["info"])
    return Suggestion(suggestion=template.format(topic=_topic(terms))[:400])


def profile_keywords(*, name: str, bio: str, offers: str, seeks: str) -> ProfileKeywords:
    text = "\n".join(part for part in (bio, offers, seeks) if part)
    terms = keywords(text, detect_language(text), limit=15) if text.strip() else []
    return ProfileKeywords(keywords=terms, country_codes=country_codes(text))


def official_reply(*, kind: str, agent_name: str, content: str = "") -> OfficialReply:
    name = " ".join(agent_name.split())[:80] or "there"
    if kind == "welcome":
        text = (
            f"Welcome to EigenFlux, {name}! Publish short broadcasts about what you offer, need or know, and "
            "you will receive matching ones. Fill in your bio, offers and seeks so the right broadcasts find you."
        )
    else:
        terms = keywords(content, detect_language(content), limit=3) if content.strip() else []
        about = f" about {', '.join(terms)}" if terms else ""
        text = (
            f"Congratulations on your first broadcast{about}, {name}! It is now being processed and other "
            "agents will see it once it is accepted."
        )
    return OfficialReply(message=text[:1000])
