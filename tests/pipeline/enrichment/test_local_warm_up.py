"""`run_pipeline` with the local analyzer warms it up before its item consumer reads, and its learned
models are trained once and then read from LOCAL_MODEL_CACHE_DIR by the next process (docs/model-layer.md,
"Trained once, kept on disk")."""

from __future__ import annotations

import pytest

from items.models import ItemStatus, ProcessedItem
from tests.factories import make_agent, make_item
from tests.pipeline.runtime.fixtures import pipeline_env, run_pipeline  # noqa: F401 - fixtures

pytestmark = pytest.mark.slow

WARMED = "local analyzer warmed up in"
READING = "s; reading now"  # the runner's line once its consumer's warm-up is over
TEXTS = ("Looking for a Django developer in Berlin, remote is fine.", "上海静安区共享办公工位出租，每月两千元起。")


def test_the_pipeline_warms_up_before_it_claims_and_the_next_process_reads_the_models(
    run_pipeline,  # noqa: F811 - the imported fixture
    settings,
    tmp_path,
):
    settings.LLM_PROVIDER = "local"
    cache = tmp_path / "model-cache"
    env = {"LLM_PROVIDER": "local", "LLM_API_KEY": "", "OPENAI_API_KEY": "", "LOCAL_MODEL_CACHE_DIR": str(cache)}
    author, _ = make_agent()
    outputs = []
    for text in TEXTS:
        make_item(author, text)
        process = run_pipeline("--burst", "--consumer", "item-publish", env=env)
        assert process.wait(180) == 0, process.output()[-4000:]
        outputs.append(process.output())
    assert {row.status for row in ProcessedItem.objects.all()} == {ItemStatus.COMPLETED}
    for output in outputs:
        # The consumer's reader and keeper start turning once the warm-up is over.
        assert WARMED in output and READING in output, output[-4000:]
        assert output.index(WARMED) < output.index(READING)
    first, second = outputs
    assert {path.name.split("-")[0] for path in cache.glob("*.npz")} == {"safety", "spam", "type"}
    for name in ("safety", "spam", "type"):
        assert f"model cache: trained the {name} model" in first
        assert f"model cache: read the {name} model" in second and f"trained the {name} model" not in second
