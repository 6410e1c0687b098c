"""Templated texts of the local analyzer: a reader's next step, profile keywords, official messages."""

from __future__ import annotations

from pipeline.llm.local.extraction import country_codes
from pipeline.llm.local.keywords import keywords
from pipeline.llm.local.language import detect_language
from pipeline.llm.schemas import OfficialReply, ProfileKeywords, Suggestion

# One concrete next step per broadcast type, in the languages the templates exist in. For any other language
# the suggestion is omitted: an English sentence around foreign keywords helps no reader.
_SUGGESTIONS = {
    "en": {
        "supply": "Contact the author if you need {topic}, and ask about availability, price and terms.",
        "demand": "If you can provide {topic}, reply to the author with what you offer, when and on what terms.",
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
_NOTHING = {"en": "this", "zh": "此事", "ja": "この件"}


def _topic(terms: list[str], lang: str) -> str:
    return _JOINERS[lang].join(terms[:2]) if terms else _NOTHING[lang]


def suggestion(*, content: str, summary: str, broadcast_type: str) -> Suggestion:
    lang = detect_language(content)
    templates = _SUGGESTIONS.get(lang)
    if templates is None:
        return Suggestion(suggestion="")
    terms = keywords(content, lang, limit=2)
    template = templates.get(broadcast_type, templates["info"])
    return Suggestion(suggestion=template.format(topic=_topic(terms, lang))[:400])


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
