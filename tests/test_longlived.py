"""Long-lived objects are frozen out of the garbage collector's full passes (eigenflux/base/longlived.py): once the
application is loaded, and after each large load on first use."""

from __future__ import annotations

import gc
import os
import weakref

import pytest

from eigenflux.base.longlived import freeze
from tests.pipeline.runtime.fixtures import pipeline_env  # noqa: F401 - fixture
from tests.probes import python_probe

_PROBE = """
import gc, json
counts = {"start": gc.get_freeze_count()}
from eigenflux.wsgi import application  # as gunicorn loads it
counts["application"] = gc.get_freeze_count()
from items import textsearch
textsearch.keyword_query("上海的显卡出租")  # the first Chinese query loads jieba's dictionary
counts["jieba"] = gc.get_freeze_count()
from pipeline.llm.local import minilm
minilm.model()
counts["model"] = gc.get_freeze_count()
counts["unfrozen"] = len(gc.get_objects())
print(json.dumps(counts))
"""


def probe(**env: str) -> dict[str, int]:
    return python_probe(_PROBE, {**os.environ, **env})


@pytest.mark.slow
def test_a_web_process_freezes_its_application_and_each_large_first_load():
    counts = probe()
    assert counts["start"] == 0
    assert counts["application"] > 50_000  # Django, the API, the admin
    assert counts["jieba"] > counts["application"]  # jieba's modules and structures
    assert counts["model"] > counts["jieba"]
    # What a full pass still walks is a small share of what the process holds.
    assert counts["unfrozen"] < counts["model"] / 10


_REQUEST_PROBE = """
import gc, json
from eigenflux.wsgi import application
from django.test import Client
client = Client()
counts = {"loaded": gc.get_freeze_count()}
garbage = [[] for _ in range(1000)]  # young objects alive while the first request runs
client.get("/healthz")
counts["first"] = gc.get_freeze_count()
garbage += [[] for _ in range(1000)]
client.get("/healthz")
counts["second"] = gc.get_freeze_count()
print(json.dumps(counts))
"""


@pytest.mark.slow
def test_a_web_process_freezes_once_more_after_its_first_request_only():
    counts = python_probe(_REQUEST_PROBE, dict(os.environ))
    assert counts["first"] >= counts["loaded"] + 1000  # what the first request built, and what was alive
    # Once per process: the lists made after it stay unfrozen (the count only drops by frozen objects freed).
    assert counts["second"] < counts["first"] + 1000


@pytest.mark.slow
def test_gc_freeze_off_freezes_nothing():
    counts = probe(GC_FREEZE="false")
    assert counts["application"] == counts["jieba"] == counts["model"] == 0
    assert counts["unfrozen"] > 100_000


_PIPELINE_PROBE = """
import django, gc, json
django.setup()
from django.core.management import call_command
before = gc.get_freeze_count()
call_command("run_pipeline", "--burst", "--no-relay", "--no-housekeeping", consumer=["test-noop"])
print(json.dumps({"before": before, "after": gc.get_freeze_count()}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("enabled", [True, False])
def test_run_pipeline_freezes_what_it_has_loaded(pipeline_env, enabled):  # noqa: F811 - the imported fixture
    env = {
        **pipeline_env,
        "PIPELINE_EXTRA_CONSUMER_MODULES": "tests.pipeline.runtime.consumers",
        "GC_FREEZE": "true" if enabled else "false",
    }
    counts = python_probe(_PIPELINE_PROBE, env)
    assert counts["before"] == 0
    if enabled:
        assert counts["after"] > 50_000  # Django, the consumers, the runtime
    else:
        assert counts["after"] == 0


def test_freeze_collects_garbage_first_and_follows_the_setting(settings):
    class Node:
        pass

    before = gc.get_freeze_count()  # an earlier test may have loaded eigenflux.asgi in this process
    try:
        settings.GC_FREEZE = False
        freeze("a test")
        assert gc.get_freeze_count() == before
        settings.GC_FREEZE = True
        cycle = Node()
        cycle.self = cycle  # garbage only the collector can free
        gone = weakref.ref(cycle)
        del cycle
        kept = Node()
        freeze("a test")
        assert gc.get_freeze_count() > before
        assert gone() is None  # collected, not frozen
        assert not any(obj is kept for obj in gc.get_objects())  # frozen: out of the collector's sight
    finally:
        gc.unfreeze()


def _at_once(call, threads: int) -> list:
    """What `call` returned in each of `threads` threads started together."""
    import threading

    results: list = []
    started = [threading.Thread(target=lambda: results.append(call())) for _ in range(threads)]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()
    return results


def test_a_load_on_first_use_runs_once_however_many_threads_ask_at_once():
    import time

    from eigenflux.base.longlived import loaded_once

    calls = []

    @loaded_once("a test load")
    def load():
        calls.append(1)
        time.sleep(0.2)  # long enough for every thread to arrive while the first one loads
        return object()

    results = _at_once(load, 8)
    assert len(calls) == 1 and len({id(result) for result in results}) == 1
    load.cache_clear()
    assert load() is not results[0] and len(calls) == 2


@pytest.mark.parametrize("module", ["safety_classifier", "spam_classifier", "type_classifier"])
def test_the_learned_models_train_once_when_the_handler_threads_start_together(module):
    import importlib

    classifier = importlib.import_module(f"pipeline.llm.local.{module}").classifier
    classifier.cache_clear()
    models = _at_once(classifier, 4)
    assert len({id(model) for model in models}) == 1
