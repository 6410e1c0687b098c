"""Local safety verdicts in four layers (docs/model-layer.md, "Local safety"): fixed patterns (prompt injection,
phishing, the old term list), the category rules over the folded text (pipeline.llm.local.safety_rules), a
learned classifier over character n-grams (pipeline.llm.local.safety_classifier) and a learned layer over the
sentence embedding (pipeline.llm.local.safety_embedding), blended with the n-gram estimate. Together they give
a risk in [0, 1]; the text is blocked at SAFETY_LOCAL_BLOCK_THRESHOLD, when the blend reaches
SAFETY_LOCAL_EMBEDDING_BLOCK_THRESHOLD, or when the hard rule fires (a minor with a sexual or grooming cue).

Every rule maps to one SafetyFlag; when several flags match, the most severe (schemas.SAFETY_FLAGS order)
is reported. The reason names the rule family, never the matched text.
"""

from __future__ import annotations

import re

import numpy as np
from django.conf import settings

from pipeline.llm.local import gates, safety_embedding
from pipeline.llm.local.lexicon import hits, lexicon
from pipeline.llm.local.normalise import fold
from pipeline.llm.local.quality import names_spam_bait
from pipeline.llm.local.safety_classifier import classifier
from pipeline.llm.local.safety_rules import RuleHit, defused, rule_hits, safety_lexicon
from pipeline.llm.schemas import SAFETY_FLAGS, SafetyFlag, SafetyVerdict

_I = re.IGNORECASE
_AI = r"(?:ai|agents?|assistants?|bots?|llms?|language models?|models?|gpts?|chatbots?)"
INJECTION_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(
        r"\b(?:ignore|disregard|forget|override|bypass)\b[^.\n]{0,40}?\b(?:previous|prior|above|earlier|all|any|your|the|system)\b"
        r"[^.\n]{0,30}?\b(?:instructions?|prompts?|rules|guidelines|directives|guardrails|policies|safety)\b",
        _I,
    ),
    re.compile(r"\byou are now (?:a|an|in|no longer)\b", _I),
    re.compile(r"\b(?:do anything now|developer mode|jailbreak|jailbroken|DAN mode)\b", _I),
    re.compile(
        r"\b(?:reveal|print|show|output|repeat|leak)\b[^.\n]{0,30}\b(?:system prompt|hidden prompt|instructions)\b", _I
    ),
    re.compile(
        r"</?\s*(?:system|assistant|instructions?|im_start|im_end)\s*>|\[/?(?:INST|SYSTEM)\]|<\|im_start\|>", _I
    ),
    re.compile(r"\b(?:new|updated|real) (?:instructions|system policy|directive)s?\s*:", _I),
    re.compile(rf"\b(?:if you are|to (?:any|all|every)|attention,?|note to|dear) (?:an? )?{_AI}\b", _I),
    re.compile(rf"\b(?:all|any|every) {_AI} (?:reading|processing|seeing|who reads?)\b", _I),
    re.compile(
        r"\b(?:send|post|share|leak|email|forward|paste)\b[^.\n]{0,30}\byour\b[^.\n]{0,20}"
        r"\b(?:api[ _-]?keys?|access tokens?|credentials|secrets|env(?:ironment)? variables|system prompt)\b",
        _I,
    ),
)
PHISHING_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(
        r"\b(?:verify|confirm|validate|unlock|restore|re-?activate|secure)\s+your\s+"
        r"(?:account|wallet|password|login|identity|card|billing|payment|details|mailbox)\b",
        _I,
    ),
    re.compile(
        r"\b(?:suspended|locked|disabled|terminated|frozen)\b[^\n]{0,80}\b(?:click|log ?in|sign ?in|verify)\b", _I
    ),
    re.compile(
        r"\b(?:enter|send|share|provide|submit|type)\s+your\s+"
        r"(?:seed|recovery|private key|password|pin|card number|cvv|ssn|social security|bank details|login)",
        _I,
    ),
    re.compile(
        r"https?://[^\s]*(?:paypa1|micr0soft|g00gle|app1e|amaz0n|0penai|faceb00k|secure-?login|login-?verify|"
        r"wallet-?connect|verify-?account|account-?update|support-?team)[^\s]*",
        _I,
    ),
    re.compile(r"https?://\d{1,3}(?:\.\d{1,3}){3}\b"),
)
_REASONS = {
    "prompt_injection": "Local rules: text addressed to AI models or agents that tries to override their instructions.",
    "phishing": "Local rules: asks readers for credentials, keys or account verification.",
    "malware": "Local rules: offers or distributes malware or attack services.",
    "fraud": "Local rules: scam or fraudulent investment wording.",
    "violent_extremism": "Local rules: violent or extremist wording.",
    "hate_harassment": "Local rules: hateful or harassing wording.",
    "child_safety": "Local rules: sexual content or contact involving minors, or minors recruited for illicit work.",
    "self_harm": "Local rules: encourages or instructs self-harm or suicide.",
    "sexual_content": "Local rules: non-consensual or extortionate sexual content.",
    "private_data": "Local rules: publishes or sells someone's personal data.",
}
# Flag names read from the lexicon, checked against the schema's (an unknown one is a KeyError, and a test).
FLAG_OF: dict[str, SafetyFlag] = {flag: flag for flag in SAFETY_FLAGS}
# The risk each kind of rule evidence gives at least; a bare term (no cue) adds none (the classifier sees it).
RULE_RISK = {"hard_rule": 1.0, "pattern": 0.97, "phrase": 0.95, "combination": 0.9}
# The classifier corroborates; it does not accuse alone. Its estimate counts half in a text where the rules saw no
# category term at all, and in one that reports, prevents, researches or offers help (a defusing word): on the
# tuning half's out-of-fold scores it cannot tell those from the real thing.
UNSUPPORTED_LEARNED_RISK = 0.5
# When the embedding blend corroborates the n-gram estimate (SAFETY_LOCAL_BLEND_CORROBORATES) on a text where the rules
# saw no category word, the estimate counts in full, up to this share of the block threshold: held for a moderator,
# never blocked on the learned layers alone. With a category word, the blend blocks.
CORROBORATED_CEILING = 0.99
# Rule evidence the stance layer never overrules: the hard rule (minors).
STANCE_SPARES = ("hard_rule",)


def matched_flags(text: str, is_defused: bool | None = None) -> set[str]:
    """The fixed patterns' and the old term list's flags; `is_defused`: whether the folded text has a defusing
    word, when the caller knows already."""
    flags: set[str] = set()
    if any(pattern.search(text) for pattern in INJECTION_PATTERNS):
        flags.add("prompt_injection")
    if any(pattern.search(text) for pattern in PHISHING_PATTERNS):
        flags.add("phishing")
    # The old term list is evidence like a category phrase: a text that analyses, reports or prevents
    # ("hiring a malware analyst for infostealer samples") is left to the other layers.
    if is_defused is None:
        is_defused = defused(fold(text))
    if is_defused:
        return flags
    for flag in lexicon()["unsafe_terms"]:
        if hits("unsafe_terms", text, flag):
            flags.add(flag)
    return flags


def _assess(text: str, content: str) -> tuple[float, list[str], bool]:
    """The risk, the flags behind it (evidence first, the classifier's nearest category last) and whether the
    hard rule fired."""
    folded = fold(text)
    is_defused = defused(folded)
    flags = sorted(matched_flags(text, is_defused), key=SAFETY_FLAGS.index)
    fixed = bool(flags)  # a fixed pattern (injection, phishing) or the old term list: stance never clears it
    risk = RULE_RISK["pattern"] if flags else 0.0
    hits_found = rule_hits(folded)
    for hit in hits_found:
        if hit.kind in RULE_RISK:
            risk = max(risk, RULE_RISK[hit.kind])
            flags.append(hit.flag)
    rule_risk = risk
    ngram, nearest = classifier().risk(text)
    learned = ngram * (UNSUPPORTED_LEARNED_RISK if is_defused or not hits_found else 1.0)
    if learned >= settings.SAFETY_LOCAL_BLOCK_THRESHOLD and not flags:
        flags += _learned_flags(hits_found, nearest, text)
    risk = max(risk, learned)
    # The learned gate (gates.py: the e5 vector and the other signals) blocks at its threshold, holds from
    # SAFETY_LOCAL_GATE_HOLD, and otherwise leaves the risk alone, so what it is unsure of does not fill the review
    # queue. It reads the content, whose vector the pipeline has just computed for duplicate detection (cached).
    row, model = None, gates.current()
    if settings.SAFETY_LOCAL_EMBEDDING_BLOCK_THRESHOLD < 1.0 and safety_embedding.readable(content or text):
        row = model.row(content or text)
        combined = model.safety.probability(row)
        if combined > risk and (
            combined >= settings.SAFETY_LOCAL_EMBEDDING_BLOCK_THRESHOLD
            or (_corroborated(ngram, combined, is_defused) and not names_spam_bait(text))
        ):
            risk = max(combined, settings.SAFETY_LOCAL_BLOCK_THRESHOLD)
            flags += [] if flags else _learned_flags(hits_found, nearest, text)
        elif _blend_clears(risk, rule_risk, is_defused):
            # A report, warning or offer of help that only the n-gram estimate finds risky: the blend, which
            # also reads the sentence vector, speaks for both learned layers. The rules' own risk stays.
            risk = max(min(risk, combined), rule_risk)
        elif _blend_corroborates(combined, is_defused):
            if hits_found:
                # A category's word, no defusing word, and both learned layers agree: blocked on the blend.
                risk = max(risk, combined)
                flags += [] if flags else _learned_flags(hits_found, nearest, text)
            else:
                # Both learned layers read harm in a text with no rule and no defusing word: the n-gram estimate
                # counts in full, but without a rule it never blocks alone (a moderator decides).
                risk = max(risk, _held_at_most(ngram))
        if combined >= settings.SAFETY_LOCAL_GATE_HOLD and risk < settings.SAFETY_LOCAL_BLOCK_THRESHOLD:
            # The learned gate reads harm that no rule names (a crime offered as an ordinary job, a threat
            # implied): never a block on its own, but a moderator looks (docs/model-layer.md, "Learned gates").
            risk = max(risk, _held_at_most(combined))
    words = (ngram, is_defused)
    cleared = None if fixed or row is None else _learned_clears(risk, hits_found, model, row, words, content, text)
    if cleared is not None:
        return cleared, [], False
    if row is not None and risk < settings.REVIEW_SAFETY_RISK:
        risk = max(risk, _learned_holds(model, row, words, hits_found))
    return risk, flags, any(hit.kind == "hard_rule" for hit in hits_found)


def _held_at_most(risk: float) -> float:
    """`risk`, capped just under the block threshold (CORROBORATED_CEILING of it): a learned reading that may hold a
    post for a moderator but never blocks it alone."""
    return min(risk, CORROBORATED_CEILING * settings.SAFETY_LOCAL_BLOCK_THRESHOLD)


def _decided(
    model: gates.GateModel, row: np.ndarray, stance: float, words: tuple[float, bool], hits_found: list[RuleHit]
) -> float | None:
    """The learned decision's probability that the post is unsafe (GateModel.decision), None without one."""
    if model.decision is None or model.topic is None:
        return None
    ngram, is_defused = words
    return model.decision.probability(
        gates.decision_inputs(
            model.safety.probability(row),
            model.topic.probability(row),
            stance,
            ngram,
            is_defused,
            {hit.kind for hit in hits_found},
        )
    )


def _learned_holds(
    model: gates.GateModel, row: np.ndarray, words: tuple[float, bool], hits_found: list[RuleHit]
) -> float:
    """The risk of a post the rest would publish: a review risk (held for a moderator, never blocked) when the learned
    decision reads it as unsafe with at least SAFETY_LOCAL_DECISION_HOLDS (1.0: never), else 0."""
    bar = settings.SAFETY_LOCAL_DECISION_HOLDS
    if model.stance is None or bar >= 1.0:
        return 0.0
    decided = _decided(model, row, model.stance.probability(row), words, hits_found)
    if decided is None or decided < bar:
        return 0.0
    return max(settings.REVIEW_SAFETY_RISK, _held_at_most(decided))


def _learned_clears(
    risk: float,
    hits_found: list[RuleHit],
    model: gates.GateModel,
    row: np.ndarray,
    words: tuple[float, bool],
    content: str,
    text: str,
) -> float | None:
    """The risk left when the learned layers clear a text the rest would block or hold: the stance layer reads the
    content as a warning, a report, a story or help rather than an offer or a threat (below
    SAFETY_LOCAL_STANCE_CLEARS), or the learned decision (GateModel.decision, over every layer's estimate and the rules
    that fired) reads it as safe (below SAFETY_LOCAL_DECISION_CLEARS). Never against the hard rule, a category phrase
    the rules kept beside a defusing word (only a first-person offer does that: "Research update: we sell ransomware
    builds"), or evidence outside the content it reads (the notes, the URL). The caller spares fixed patterns and the
    old term list. `words`: the n-gram estimate and whether a defusing word is there. None: it does not clear."""
    if model.stance is None or risk < settings.REVIEW_SAFETY_RISK:
        return None
    is_defused = words[1]
    if any(hit.kind in STANCE_SPARES or (is_defused and hit.kind in ("phrase", "combination")) for hit in hits_found):
        return None
    if text != content and hits_found != rule_hits(fold(content)):
        return None
    stance = model.stance.probability(row)
    if stance < settings.SAFETY_LOCAL_STANCE_CLEARS:
        return min(stance, settings.REVIEW_SAFETY_RISK / 2)  # published, never held
    decided = _decided(model, row, stance, words, hits_found)
    if decided is not None and decided < settings.SAFETY_LOCAL_DECISION_CLEARS:
        return min(decided, settings.REVIEW_SAFETY_RISK / 2)
    return None


def _blend_corroborates(combined: float, is_defused: bool) -> bool:
    """Whether the blend, on a text with no defusing word, reaches SAFETY_LOCAL_BLEND_CORROBORATES: then the n-gram
    estimate is not halved for want of a rule."""
    return not is_defused and combined >= settings.SAFETY_LOCAL_BLEND_CORROBORATES


def _corroborated(ngram: float, combined: float, is_defused: bool) -> bool:
    """Whether both learned layers agree that a text with no defusing word is unsafe: the blend reaches
    SAFETY_LOCAL_CORROBORATED_BLEND and the n-gram estimate SAFETY_LOCAL_CORROBORATED_NGRAM (harm said in everyday
    words, which no rule names and neither layer is sure of alone). A post that names spam's own bait is left to
    the spam gate (quality.names_spam_bait)."""
    return (
        not is_defused
        and combined >= settings.SAFETY_LOCAL_CORROBORATED_BLEND
        and ngram >= settings.SAFETY_LOCAL_CORROBORATED_NGRAM
    )


def _blend_clears(risk: float, rule_risk: float, is_defused: bool) -> bool:
    """Whether a text below the block threshold, with a defusing word, takes the blend's risk for the review
    decision (SAFETY_LOCAL_BLEND_CLEARS_DEFUSED)."""
    return (
        settings.SAFETY_LOCAL_BLEND_CLEARS_DEFUSED
        and is_defused
        and rule_risk < risk < settings.SAFETY_LOCAL_BLOCK_THRESHOLD
    )


def _learned_flags(hits_found: list[RuleHit], nearest: str, text: str) -> list[str]:
    """A learned block's flags: the bare terms seen, then the nearest category's. When a rule fired, its flag
    stands instead (the classifier's confidence does not make a self-harm phrase a threat). A post with no
    category word that names spam's own bait is a scam's, whatever category the learned layers find nearest
    ("make money fast, click here" reads as near an attack offer): its flag is fraud, not malware."""
    if not hits_found and names_spam_bait(text):
        return ["fraud"]
    categories = safety_lexicon()["categories"]
    return [hit.flag for hit in hits_found if hit.kind == "term"] + [
        categories[nearest]["flag"] if nearest in categories else "fraud"
    ]


def safety_verdict(*, content: str, notes: str = "", url: str = "") -> SafetyVerdict:
    risk, flags, hard_rule = _assess("\n".join(part for part in (content, notes, url) if part), content)
    risk = round(min(max(risk, 0.0), 1.0), 4)
    if hard_rule:
        return SafetyVerdict(safe=False, flag="child_safety", reason=_REASONS["child_safety"], risk=1.0)
    if risk >= settings.SAFETY_LOCAL_BLOCK_THRESHOLD and flags:
        flag = FLAG_OF[min(flags, key=SAFETY_FLAGS.index) if risk > RULE_RISK["combination"] - 0.01 else flags[0]]
        return SafetyVerdict(safe=False, flag=flag, reason=_REASONS.get(flag, f"Local rules: {flag}."), risk=risk)
    return SafetyVerdict(safe=True, flag="none", reason="Local rules found no unsafe pattern.", risk=risk)
