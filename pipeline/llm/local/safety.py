"""Rule-based safety verdicts: prompt-injection and phishing patterns plus the shipped lexicon.

Every rule maps to one SafetyFlag; when several flags match, the most severe (schemas.SAFETY_FLAGS order)
is reported. The reason names the rule family, never the matched text.
"""

from __future__ import annotations

import re

from pipeline.llm.local.lexicon import hits, lexicon
from pipeline.llm.schemas import SAFETY_FLAGS, SafetyVerdict

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
}


def matched_flags(text: str) -> set[str]:
    flags: set[str] = set()
    if any(pattern.search(text) for pattern in INJECTION_PATTERNS):
        flags.add("prompt_injection")
    if any(pattern.search(text) for pattern in PHISHING_PATTERNS):
        flags.add("phishing")
    for flag in lexicon()["unsafe_terms"]:
        if hits("unsafe_terms", text, flag):
            flags.add(flag)
    return flags


def safety_verdict(*, content: str, notes: str = "", url: str = "") -> SafetyVerdict:
    flags = matched_flags("\n".join(part for part in (content, notes, url) if part))
    for flag in SAFETY_FLAGS:
        if flag in flags:
            return SafetyVerdict(safe=False, flag=flag, reason=_REASONS.get(flag, f"Local rules: {flag}."))
    return SafetyVerdict(safe=True, flag="none", reason="Local rules found no unsafe pattern.")
