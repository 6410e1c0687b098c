"""The offline embedding, all-MiniLM-L6-v2 run in numpy: it reproduces the model's published output, keeps
paraphrases close and unrelated texts apart, batches consistently, keeps unrelated Chinese texts apart (the
CJK bigram blend), and refuses a vector size it cannot make."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from django.core.checks import run_checks

from pipeline.llm import ModelUnavailable, embed
from pipeline.llm.local import minilm
from pipeline.llm.local.embedding import embed_texts

# sentence-transformers' all-MiniLM-L6-v2 on "hello world" (normalised): the first five components, as
# published in FastEmbed's canonical-vector test for this model.
HELLO_WORLD = [-0.034478, 0.03102, 0.00673, 0.02611, -0.039362]


@pytest.fixture
def minilm_settings(settings):
    settings.LLM_PROVIDER = "local"
    settings.LOCAL_EMBEDDING = "minilm"
    settings.EMBEDDING_DIMENSIONS = 384
    return settings


def vectors(texts: list[str]) -> np.ndarray:
    return np.asarray(embed_texts(texts, 384))


def test_the_numpy_forward_pass_reproduces_the_published_vector(minilm_settings):
    vector = vectors(["hello world"])[0]
    assert vector.shape == (384,)
    assert np.allclose(vector[:5], HELLO_WORLD, atol=1e-4)
    assert np.isclose(np.linalg.norm(vector), 1.0, atol=1e-5)
    # The model card's classic pair: food sentences close, an unrelated one far.
    food, bread, cat = vectors(["A man is eating food.", "A man is eating a piece of bread.", "The cat sits outside"])
    assert food @ bread == pytest.approx(0.755, abs=0.01)
    assert food @ cat < 0.2


def test_paraphrases_are_close_and_unrelated_texts_far(minilm_settings):
    offer, paraphrase, unrelated = vectors(
        [
            "Need an experienced engineer to set up a production Kubernetes cluster on bare metal, with monitoring "
            "and autoscaling, within two weeks.",
            "Looking for a seasoned engineer who can build us a bare-metal production Kubernetes cluster, including "
            "monitoring and autoscaling, in the next two weeks.",
            "Seeking office space for six people in Lisbon from February.",
        ]
    )
    assert offer @ paraphrase > 0.8
    assert offer @ unrelated < 0.2


def test_batches_give_the_same_vectors_as_single_texts(minilm_settings):
    texts = ["short", "a somewhat longer sentence about GPU rental in Frankfurt", "中文文本", "x" * 3000]
    batched = vectors(texts)
    single = np.stack([vectors([text])[0] for text in texts])
    assert np.allclose(batched, single, atol=1e-5)


def test_concurrent_first_use_loads_one_model(minilm_settings):
    loaded = []
    threads = [threading.Thread(target=lambda: loaded.append(minilm.model())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(loaded) == 4 and all(model is loaded[0] for model in loaded)


def test_unrelated_chinese_texts_stay_apart_and_near_duplicates_close(minilm_settings):
    """The model alone puts any two Chinese texts near 0.6 (it cannot read them); the bigram blend does not."""
    office, office_edit, gpu, typhoon = vectors(
        [
            "上海静安区共享办公工位出租，每月两千元起，含会议室和网络。",
            "上海静安区共享办公工位出租，每月两千元起，含会议室与网络。",
            "我们在上海有 32 张 A100 显卡可以按小时出租，适合大模型训练和推理，价格可议。",
            "台风红色预警：强台风预计周四在浙江沿海登陆，上海将有大暴雨，请做好防范。",
        ]
    )
    assert office @ office_edit > 0.9  # grouped at the default SIMILARITY_THRESHOLD of 0.80
    assert office @ gpu < 0.5 and office @ typhoon < 0.5 and gpu @ typhoon < 0.5
    model_only = minilm.model().embed(
        ["上海静安区共享办公工位出租，每月两千元起，含会议室和网络。", "台风红色预警：强台风预计周四在浙江沿海登陆。"]
    )
    assert model_only[0] @ model_only[1] > office @ typhoon  # what the blend corrects


@pytest.mark.django_db
def test_a_vector_size_the_model_cannot_make_is_refused(minilm_settings):
    minilm_settings.EMBEDDING_DIMENSIONS = 256
    with pytest.raises(ModelUnavailable, match="EMBEDDING_DIMENSIONS"):
        embed(["hello"])
    assert "eigenflux.E007" in {message.id for message in run_checks()}
    minilm_settings.EMBEDDING_DIMENSIONS = 384
    assert "eigenflux.E007" not in {message.id for message in run_checks()}


def test_the_same_topic_meets_across_english_chinese_and_japanese(minilm_settings):
    """The glosses (CC-CEDICT, JMdict) carry CJK text into the model's English space; bigrams alone cannot
    (linear algebra in Chinese and Japanese shares two characters of four, and none with English)."""
    english, chinese, japanese, unrelated_en, unrelated_zh = vectors(
        [
            "Looking for a linear algebra tutor for a university student, two evenings a week.",
            "为大学生寻找线性代数家教，每周两个晚上。",
            "大学生のための線形代数の家庭教師を探しています。週二回の夜です。",
            "Container space from Shanghai to Rotterdam on the next two sailings.",
            "下两个航次有从上海到鹿特丹的集装箱舱位。",
        ]
    )
    assert chinese @ english > 0.5 and japanese @ english > 0.5 and chinese @ japanese > 0.5
    for text in (english, chinese, japanese):
        assert text @ unrelated_en < 0.3 and text @ unrelated_zh < 0.3
    assert unrelated_zh @ unrelated_en > 0.5  # the shipping offer meets its translation too
