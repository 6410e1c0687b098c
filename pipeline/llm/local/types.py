"""The broadcast type from cue words (data/lexicon.json `type_cues`) in English, Chinese and Japanese, and a
learned model (type_classifier.py): each cue counts its type's weight; a question leans to demand; the model
adds MODEL_WEIGHT times each type's probability; nothing above the info weight is info. Ties go to the more
urgent type (alert, demand, supply, info)."""

from __future__ import annotations

import regex

from pipeline.llm.local.lexicon import hits
from pipeline.llm.local.type_classifier import TYPES, type_probabilities

TYPE_WEIGHT = {"alert": 1.5, "demand": 1.2, "supply": 1.0, "info": 0.4}
QUESTION_WEIGHT = 0.6
# The model's say: at 2.0 a confident reading outweighs one cue. Chosen by five-fold cross-validation on the
# model's training file (docs/model-layer.md#quality-signals): on its training-only posts, which the cues were
# not written for, 0.62 of the types were right by the cues alone and 0.76 with the model.
MODEL_WEIGHT = 2.0
# Cues the phrase lexicon cannot hold: a sentence that opens with a bare "Need …"/"Want someone …" (the
# pronoun dropped), and 求 "seek" where it is not part of 要求 "requirement", 需求 "demand (noun)" or 追求.
_DEMAND = regex.compile(
    r"(?:^|[.!?\n]\s*)(?:need|want|require)s?\s+(?:someone|somebody|a|an|help|some|the|my|our|\w+ers?)\b|"
    r"(?<![要需追])求(?!职)",
    regex.IGNORECASE,
)
# A CVE named without its number ("a new CVE in …"); "cve-" with a number is a lexicon cue. Not a lexicon cue
# itself: Latin cue words are kept out of keywords, and readers search for "cve".
_ALERT = regex.compile(r"(?<![\w-])CVE(?![\w-])")
_QUESTION = regex.compile(r"[?？]|(?:吗|か)[。]?\s*$|教えてください|いませんか")


def type_scores(text: str) -> dict[str, float]:
    scores = {kind: len(hits("type_cues", text, kind)) * TYPE_WEIGHT[kind] for kind in TYPES}
    scores["demand"] += len(_DEMAND.findall(text)) * TYPE_WEIGHT["demand"]
    scores["alert"] += len(_ALERT.findall(text)) * TYPE_WEIGHT["alert"]
    if _QUESTION.search(text):
        scores["demand"] += QUESTION_WEIGHT
    for kind, share in type_probabilities(text).items():
        scores[kind] += MODEL_WEIGHT * share
    return scores


def broadcast_type(text: str) -> str:
    scores = type_scores(text)
    best = max(scores.values())
    if best <= TYPE_WEIGHT["info"]:
        return "info"
    return next(kind for kind in TYPES if scores[kind] == best)
