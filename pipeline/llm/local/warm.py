"""Warming the local analyzer up before a process takes work (docs/model-layer.md, "Trained once, kept on disk").

Everything the analyzer loads on first use — the learned models (trained, or read from the model cache), the
compiled safety lexicon, MiniLM, the CJK glossary, jieba's and janome's dictionaries, the language profiles — is
loaded here, by running each task on a few posts in English, Chinese and Japanese: a consumer calls this before it
claims its first entry (pipeline.runtime.Consumer.warm_up), so no item pays for the loading while its lease runs.
Consumers warming up at once in one process wait for one warm-up.
A step that fails is logged and skipped: the first item that needs it then fails or loads it, as without warm-up.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from django.conf import settings

from pipeline.llm.local import extraction, replies, safety, spam_classifier, type_classifier
from pipeline.llm.local.embedding import embed_texts
from pipeline.llm.local.safety_classifier import classifier as safety_classifier

log = logging.getLogger(__name__)
SAMPLES = (
    "Looking for a backend developer in Berlin who knows Django and PostgreSQL; remote is fine.",
    "上海静安区共享办公工位出租，每月两千元起，含会议室和网络。",
    "中古の自転車を譲ります。東京都内で手渡しできる方、連絡ください。",
)
_lock = threading.Lock()
_warmed: dict[str, float] = {}


def _embed() -> None:
    embed_texts(list(SAMPLES), int(settings.EMBEDDING_DIMENSIONS))


def _judge() -> None:
    for text in SAMPLES:
        safety.safety_verdict(content=text)


def _extract() -> None:
    for text in SAMPLES:
        found = extraction.extract(content=text)
        replies.suggestion(content=text, summary=found.summary, broadcast_type=found.broadcast_type)
        replies.official_reply(kind="first_broadcast", agent_name="warm-up", content=text)
    replies.profile_keywords(name="warm-up", bio=SAMPLES[0], offers=SAMPLES[1], seeks=SAMPLES[2])


STEPS: dict[str, Callable[[], object]] = {
    "safety model": safety_classifier,
    "spam model": spam_classifier.classifier,
    "type model": type_classifier.classifier,
    "embedding": _embed,
    "safety check": _judge,
    "extraction": _extract,
}


def warm_up() -> dict[str, float]:
    """Loads everything the local analyzer's tasks use, once per process; the CPU seconds of each step (of the
    first call: later calls return the same figures at once)."""
    with _lock:
        if _warmed:
            return dict(_warmed)
        started, cpu = time.monotonic(), time.process_time()
        for name, step in STEPS.items():
            before = time.process_time()
            try:
                step()
            except Exception as error:  # warm-up only saves time; the item will say what is wrong
                log.warning("local analyzer warm-up: %s failed (%s: %s)", name, type(error).__name__, error)
            _warmed[name] = time.process_time() - before
        log.info(
            "local analyzer warmed up in %.2f s (%.2f s CPU: %s)",
            time.monotonic() - started,
            time.process_time() - cpu,
            ", ".join(f"{name} {seconds:.2f}" for name, seconds in _warmed.items()),
        )
        return dict(_warmed)
