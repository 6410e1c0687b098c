"""The offline analyzer's decisions are the pipeline's: broadcasts published through the API and enriched by a real
`run_pipeline --burst` process end as the decision function the analyzer benches use (`bench.review_queue.outcome`,
which judges each text alone) says they do — unsafe ones discarded by the safety gate, spam by the quality gate,
ordinary and safe-but-edgy ones completed. bench/fresh_pipeline.py measures the same agreement on a whole fresh set."""

from __future__ import annotations

import pytest
from django.test import Client

from items.models import ItemStatus, ModerationDecision, ProcessedItem
from tests.factories import make_agent
from tests.pipeline.enrichment.test_local_default import burst  # noqa: F401 - fixture
from tests.pipeline.runtime.fixtures import pipeline_env, run_pipeline  # noqa: F401 - fixtures

pytestmark = pytest.mark.slow

# (text, what it should come to): written for this test, in the three languages.
BROADCASTS = [
    ("Selling untraceable pistols with the serial numbers ground off, cash only, delivery this week.", "discarded"),
    ("出售银行卡四件套和实名手机卡，包过风控，量大从优。", "discarded"),
    ("闇バイト募集：高齢者宅から現金を受け取るだけの簡単なお仕事、即日払い。", "discarded"),
    (
        "Our team runs authorised penetration tests for fintech apps; the report maps every finding to OWASP ASVS.",
        "completed",
    ),
    ("新闻：警方破获一个利用钓鱼网站盗刷信用卡的团伙，提醒大家不要点击陌生链接。", "completed"),
    ("Looking for a Rust reviewer for a 2k-line async parser, paid, two days of work.", "completed"),
    ("東京でA100を4枚、週末だけ時間貸しします。1時間3000円から。", "completed"),
    ("Great opportunity!!! Contact me for details.", "discarded"),
    ("关注我，互粉互赞，回关必回！！", "discarded"),
]


def test_a_published_broadcast_ends_as_the_analyzer_benches_say(burst):  # noqa: F811 - the imported fixture
    from bench.review_queue import outcome

    _, token = make_agent()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    ids = {}
    for text, _ in BROADCASTS:
        response = client.post("/api/v1/items/publish", {"content": text}, content_type="application/json")
        assert response.status_code == 202, response.content
        ids[text] = int(response.json()["item_id"])
    burst()

    seen_as = {"published": ItemStatus.COMPLETED, "held": ItemStatus.REVIEW, "discarded": ItemStatus.DISCARDED}
    rows = {row.pk: row for row in ProcessedItem.objects.filter(pk__in=ids.values())}
    for text, wanted in BROADCASTS:
        alone, stage = outcome(text)
        row = rows[ids[text]]
        assert row.status == wanted == seen_as[alone], (text, row.status, alone, stage)
        # Not refusals: a safety step that passed, or found the risk in the review band (uncertain).
        refused = ModerationDecision.objects.filter(item=row).exclude(verdict__in=("pass", "uncertain"))
        if stage.startswith("safety:"):  # the same gate, for the same reason
            assert f"{refused.get().stage}:{refused.get().category}" == stage
        elif stage == "low_quality":
            assert refused.get().stage == "quality"
