"""The offline default end to end: `run_pipeline --burst` with the local analyzer and the MiniLM embedding
(no model server at all) groups a near-duplicate paraphrase with its original and keeps unrelated items,
Chinese ones included, in groups of their own; the completed items are then found by search."""

from __future__ import annotations

import pytest
from django.test import Client

from items.models import ItemStatus, ProcessedItem
from tests.factories import make_agent, make_item
from tests.pipeline.runtime.fixtures import pipeline_env, run_pipeline  # noqa: F401 - fixtures

pytestmark = pytest.mark.slow

ORIGINAL = (
    "A new open-weights 8B language model was released under Apache 2.0, matching much larger models on coding "
    "benchmarks."
)
PARAPHRASE = (
    "An 8B-parameter language model with open weights just came out under the Apache 2.0 licence and scores like "
    "far larger models on code benchmarks."
)
UNRELATED = [
    "Heatwave warning for southern Spain: temperatures up to 44 °C expected through Sunday.",
    "上海静安区共享办公工位出租，每月两千元起，含会议室和网络。",
    "台风红色预警：强台风预计周四在浙江沿海登陆，上海将有大暴雨，请做好防范。",
    "我们在上海有 32 张 A100 显卡可以按小时出租，适合大模型训练和推理，价格可议。",
]


@pytest.fixture
def burst(run_pipeline, settings):  # noqa: F811 - the imported fixture
    settings.LLM_PROVIDER = "local"
    settings.LOCAL_EMBEDDING = "minilm"

    def run() -> None:
        process = run_pipeline(
            "--burst",
            "--consumer",
            "item-publish",
            env={
                "LLM_PROVIDER": "local",
                "LOCAL_EMBEDDING": "minilm",
                "LLM_API_KEY": "",
                "OPENAI_API_KEY": "",
                "PIPELINE_RETRY_BASE_SECONDS": "0.05",
                "PIPELINE_RETRY_MAX_SECONDS": "0.2",
            },
        )
        code = process.wait(120)
        assert code == 0, process.output()[-4000:]

    return run


def test_a_near_duplicate_paraphrase_is_grouped_and_unrelated_items_are_not(burst):
    author, token = make_agent()
    original = make_item(author, ORIGINAL)
    others = [make_item(author, text) for text in UNRELATED]
    burst()
    paraphrase = make_item(author, PARAPHRASE)
    burst()
    rows = {row.pk: row for row in ProcessedItem.objects.all()}
    assert {row.status for row in rows.values()} == {ItemStatus.COMPLETED}
    assert rows[paraphrase.pk].group_id == rows[original.pk].group_id == original.pk
    assert all(rows[other.pk].group_id == other.pk for other in others)  # each alone: nothing unrelated joined
    assert {row.analyzer for row in rows.values()} == {"local"}

    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = client.get("/api/v1/search", {"q": "上海 出租", "mode": "hybrid"})
    found = [int(entry["item_id"]) for entry in response.json()["items"]]
    assert set(found) == {others[1].pk, others[3].pk}
    chinese = rows[others[3].pk]
    assert "显卡" in chinese.keywords and "言模" not in chinese.keywords  # words, not character pairs
    assert chinese.suggestion.startswith("如果你需要")  # in the item's language
