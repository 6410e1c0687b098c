"""Floors on the local analyzer's accuracy per field over the labelled corpus (bench/data), so a change that
makes it worse fails here. The figures themselves: `.venv/bin/python bench/local_analyzer_accuracy.py`."""

from __future__ import annotations

import pytest

from pipeline.llm import local
from tests.pipeline.llm.corpus_accuracy import corpus_tally, share

pytestmark = pytest.mark.slow  # analyses the whole labelled corpus (tens of seconds)

# Measured (docs/search.md) minus a margin. The lexicon was tuned on this corpus, so these guard against
# regressions; they do not estimate accuracy on new text.
FLOORS = {
    ("language", "all"): 0.98,
    ("broadcast type", "all"): 0.85,
    ("broadcast type", "zh"): 0.85,
    ("broadcast type", "ja"): 0.85,
    ("domain precision", "all"): 0.80,
    ("main domain found", "all"): 0.85,
    ("main domain found", "zh"): 0.85,
    ("main domain found", "ja"): 0.80,
    ("has a domain", "all"): 0.95,
    ("key terms found", "all"): 0.75,
    ("key terms found", "zh"): 0.50,
    ("key terms found", "ja"): 0.90,
    ("suggestion language", "all"): 1.0,
    ("not discarded", "all"): 1.0,
}


@pytest.fixture(scope="module")
def tally():
    return corpus_tally()


@pytest.mark.parametrize(("field", "group"), sorted(FLOORS))
def test_accuracy_floor(tally, field, group):
    assert share(tally, field, group) >= FLOORS[(field, group)]


def test_the_misreadings_from_the_issue_are_gone():
    gpu = local.extract(content="Offering 64 spare A100 GPUs for rent by the hour, InfiniBand between nodes.")
    assert "real_estate" not in gpu.domains and gpu.domains[0] == "compute" and gpu.broadcast_type == "supply"
    cve = local.extract(content="Critical vulnerability CVE-2031-0417 allows remote code execution. Patch now.")
    assert "jobs" not in cve.domains and "security" in cve.domains and cve.broadcast_type == "alert"
    chinese = local.extract(content="我们提供大语言模型推理服务，支持私有化部署，欢迎咨询。")
    assert {"大语", "言模", "型推"}.isdisjoint(chinese.keywords)
    assert "ai" in chinese.domains
    reply = local.suggestion(content="寻找一位熟悉中文法律文本的标注专家。", summary="", broadcast_type="demand")
    assert reply.suggestion.startswith("如果你能提供") and "If you can provide" not in reply.suggestion
    german = local.suggestion(
        content="Wir suchen eine Rust-Entwicklerin für drei Monate.", summary="", broadcast_type="demand"
    )
    assert german.suggestion == ""  # no template in that language: omitted, not English
