"""The CJK glossary: its two dictionary parsers on small samples of their real formats, and glossing with the
shipped dictionaries (CC-CEDICT, JMdict/EDICT2): longest-match words, Japanese read with the Japanese
dictionary first, grammar (hiragana) left out, Latin words kept, and a clear error without the package."""

from __future__ import annotations

import sys

import pytest
from django.core.checks import run_checks

from pipeline.llm import ModelUnavailable
from pipeline.llm.local import glossary
from pipeline.llm.local.embedding import embed_texts

CEDICT_SAMPLE = """# CC-CEDICT
檯風 台风 [tai2 feng1] /stage presence/
颱風 台风 [tai2 feng1] /hurricane/typhoon/
王 王 [Wang2] /surname Wang/
王 王 [wang2] /king or monarch/best or strongest of its type/
線性代數 线性代数 [xian4 xing4 dai4 shu4] /linear algebra/
個 个 [ge4] /variant of 箇|个[ge4]/
"""
EDICT2_SAMPLE = """\u3000\uff1f\uff1f\uff1f /EDICT2 header/
線形代数 [せんけいだいすう] /(n) {math} linear algebra/EntL1/
会社;會社 [かいしゃ] /(n) company/corporation/(2) workplace/(P)/EntL2/
会社 [かいしゃ] /(n) uncommon sense/EntL3/
エンジニア /(n) engineer/(P)/EntL4/
"""


def test_cedict_keeps_a_common_word_over_a_surname_and_two_meanings_at_most():
    parsed = glossary.parse_cedict(CEDICT_SAMPLE)
    assert parsed["台风"] == "stage presence / hurricane"  # one from each entry: both senses reach the model
    assert parsed["颱風"] == "hurricane / typhoon"
    assert parsed["线性代数"] == parsed["線性代數"] == "linear algebra"
    assert "个" not in parsed  # one character: never cut on; "variant of" names no meaning anyway


def test_edict2_prefers_common_entries_and_reads_every_spelling():
    parsed = glossary.parse_edict2(EDICT2_SAMPLE)
    assert parsed["線形代数"] == "linear algebra"
    assert parsed["会社"] == parsed["會社"] == "company / corporation"  # the (P) entry, its first sense only
    assert parsed["エンジニア"] == "engineer"
    assert "かいしゃ" not in parsed  # hiragana alone is never glossed, so not kept


def test_chinese_and_japanese_words_get_english_glosses():
    assert "linear algebra" in glossary.gloss_text("线性代数辅导")
    assert "linear algebra" in glossary.gloss_text("線形代数の家庭教師を探しています")
    japanese = glossary.gloss_text("機械学習エンジニア 募集")
    assert japanese.startswith("machine learning engineer")
    assert "GPU" in glossary.gloss_text("租用GPU算力").split()  # Latin words stay, in place


def test_text_without_known_cjk_words_has_no_gloss():
    assert glossary.gloss_text("Offering A100 GPUs in Frankfurt") == ""
    assert glossary.gloss_text("ですます") == ""  # hiragana alone: grammar, not topic
    assert glossary.gloss_text("") == ""


def test_without_the_dictionary_package_embedding_fails_as_a_model_error(settings, monkeypatch):
    settings.LLM_PROVIDER, settings.LOCAL_EMBEDDING, settings.EMBEDDING_DIMENSIONS = "local", "minilm", 384
    monkeypatch.setitem(sys.modules, "edictreader", None)  # what `import edictreader` meets when not installed
    glossary.glossary.cache_clear()  # loaded again, for real, by the next test that needs it
    with pytest.raises(ModelUnavailable, match="edictreader"):
        embed_texts(["线性代数"], 384)
    assert "eigenflux.E009" in {message.id for message in run_checks()}
    assert embed_texts(["English needs no dictionary"], 384)  # English text still embeds
