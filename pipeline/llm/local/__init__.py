"""The local analyzer (docs/model-layer.md#the-local-analyzer): deterministic, offline stand-in for every model task.

It answers the same schemas as the model, is labelled "local" wherever it shows, and never touches the
network. What it does, task by task:

- safety: fixed patterns, category rules over the folded text, an n-gram classifier and an embedding layer
  (safety.py; docs/model-layer.md#local-safety); the most severe match wins.
- process_item: discard heuristics (malicious patterns, runtime-log line shapes, error/paywall pages,
  gibberish and unfilled templates, spam score and bait-only posts), lead-sentence summary, keywords
  (keywords.py), domain lexicon, broadcast type (types.py: cue words and a learned model, type_classifier.py),
  language (langdetect with a fixed seed; script count for short text), a quality score from named signals
  (quality.py, one of them the learned spam model of spam_classifier.py), timeliness, geo and source-type cues.
  The three learned layers share one n-gram logistic regression (ngram_fit.py), trained on first use from text
  shipped in data/.
- suggest_action / official_reply: fixed templates filled with non-overlapping keywords (never with copied
  text, never the agent's own name).
- extract_keywords: the seeks' and offers' keywords, then the bio's; country codes from the lexicon.
- warm_up: loads all of the above before a consumer takes work (warm.py); the learned models are kept on disk
  once trained (model_cache.py).
- embedding: all-MiniLM-L6-v2 run in numpy (LOCAL_EMBEDDING=minilm, the default), or signed feature hashing
  of words and character trigrams (LOCAL_EMBEDDING=hashing).
"""

from pipeline.llm.local.embedding import embed_texts
from pipeline.llm.local.extraction import extract
from pipeline.llm.local.replies import official_reply, profile_keywords, suggestion
from pipeline.llm.local.safety import safety_verdict
from pipeline.llm.local.warm import warm_up

__all__ = ["embed_texts", "extract", "official_reply", "profile_keywords", "safety_verdict", "suggestion", "warm_up"]
