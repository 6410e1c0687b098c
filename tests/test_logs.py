"""The log context and the two log formats (eigenflux.base.logs): bound ids reach every line, in text and in JSON;
they never leak out of their block or into another thread; untrusted ids cannot forge lines."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import threading

import pytest

from eigenflux.base.logs import (
    JsonFormatter,
    LogContextFilter,
    TextFormatter,
    current_log_context,
    lazy_log_context,
    log_context,
    loggable_id,
    trace_id_from_traceparent,
)
from tests.pipeline.runtime.fixtures import REPO, pipeline_env  # noqa: F401 - fixture

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture
def capture():
    """A logger writing through the project's filter and a chosen formatter into a buffer."""
    buffers = []

    def make(formatter: logging.Formatter) -> tuple[logging.Logger, io.StringIO]:
        buffer = io.StringIO()
        handler = logging.StreamHandler(buffer)
        handler.addFilter(LogContextFilter())
        handler.setFormatter(formatter)
        logger = logging.getLogger(f"tests.logs.{len(buffers)}")
        logger.handlers = [handler]
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        buffers.append(logger)
        return logger, buffer

    yield make
    for logger in buffers:
        logger.handlers = []


def lines(buffer: io.StringIO) -> list[str]:
    return buffer.getvalue().splitlines()


def test_json_lines_carry_the_bound_fields_and_only_those(capture):
    logger, buffer = capture(JsonFormatter())
    logger.info("outside")
    with log_context(item_id="42", event_id="e-1", trace_id="4bf92f3577b34da6a3ce929d0e0e4736"):
        with log_context(group="cg:item:publish", delivery_count=2):
            logger.warning("inside %s", "both")
        logger.info("outer only")
    outside, both, outer = (json.loads(line) for line in lines(buffer))
    assert outside["message"] == "outside" and outside["level"] == "INFO" and outside["logger"] == logger.name
    assert "item_id" not in outside and "time" in outside
    assert both["message"] == "inside both" and both["level"] == "WARNING"
    assert {k: both[k] for k in ("item_id", "event_id", "trace_id", "group", "delivery_count")} == {
        "item_id": "42",
        "event_id": "e-1",
        "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
        "group": "cg:item:publish",
        "delivery_count": 2,
    }
    assert "group" not in outer and outer["item_id"] == "42"


def test_json_keeps_a_traceback_on_one_line(capture):
    logger, buffer = capture(JsonFormatter())
    try:
        raise ValueError("boom")
    except ValueError:
        with log_context(item_id="7"):
            logger.exception("failed")
    (line,) = lines(buffer)
    record = json.loads(line)
    assert record["item_id"] == "7"
    assert "ValueError: boom" in record["exc_info"]


def test_text_format_appends_the_context_before_any_traceback(capture):
    logger, buffer = capture(TextFormatter("%(levelname)s %(message)s"))
    with log_context(item_id="42", consumer="item-publish-host-1-abc"):
        try:
            raise RuntimeError("x")
        except RuntimeError:
            logger.exception("handler failed")
    first, *rest = lines(buffer)
    assert first == "ERROR handler failed item_id=42 consumer=item-publish-host-1-abc"
    assert rest[0].startswith("Traceback") and rest[-1] == "RuntimeError: x"


def test_an_explicit_extra_wins_over_the_bound_context(capture):
    logger, buffer = capture(JsonFormatter())
    with log_context(item_id="1"):
        logger.info("x", extra={"item_id": "2"})
    assert json.loads(lines(buffer)[0])["item_id"] == "2"


def test_the_context_ends_with_its_block_even_on_error_and_stays_in_its_thread():
    with pytest.raises(KeyError), log_context(item_id="9"):
        raise KeyError("x")
    assert dict(current_log_context()) == {}

    seen = {}
    with log_context(item_id="main"):
        thread = threading.Thread(target=lambda: seen.update(current_log_context()))
        thread.start()
        thread.join()
    assert seen == {}  # a new thread starts with an empty context: nothing leaks between handler threads


def test_unknown_or_empty_fields():
    with pytest.raises(ValueError, match="itemid"), log_context(itemid="1"):
        pass
    with log_context(item_id=None, event_id=""):
        assert dict(current_log_context()) == {}


def test_trace_ids_come_only_from_well_formed_traceparents():
    assert trace_id_from_traceparent(TRACEPARENT) == "4bf92f3577b34da6a3ce929d0e0e4736"
    for bad in (
        "",
        None,
        "garbage",
        TRACEPARENT.upper(),
        TRACEPARENT + "\nforged",
        "00-" + "0" * 32 + "-00f067aa0ba902b7-01",
    ):
        assert trace_id_from_traceparent(bad) is None


def test_untrusted_ids_cannot_split_or_forge_a_line():
    assert loggable_id("0f8e2c1a-uuid-like") == "0f8e2c1a-uuid-like"
    assert loggable_id(123) == "123"
    assert loggable_id("x\n2026-01-01 INFO forged") == "(not an id)"
    assert loggable_id("a" * 500) == "(not an id)"
    assert loggable_id("") is None and loggable_id(None) is None


def test_a_lazy_context_is_computed_only_for_lines_written_and_cannot_break_them(capture):
    logger, buffer = capture(JsonFormatter())
    calls = []

    def fields():
        calls.append(1)
        return {"item_id": "5", "bogus": "dropped"}

    with lazy_log_context(fields):
        logger.debug("one")
        logger.info("two")
    assert len(calls) == 2
    with lazy_log_context(lambda: {"item_id": "6"}):
        pass  # nothing written: nothing computed (the lambda would count if it were called)
    one, two = (json.loads(line) for line in lines(buffer))
    assert one["item_id"] == two["item_id"] == "5" and "bogus" not in one

    def broken():
        raise RuntimeError("bug")

    with lazy_log_context(broken), log_context(event_id="e"):
        logger.info("still written")
    assert json.loads(lines(buffer)[-1])["event_id"] == "e"


@pytest.mark.slow
def test_in_json_mode_warnings_and_uncaught_errors_are_json_lines_too(pipeline_env):  # noqa: F811
    code = (
        "import threading, warnings; warnings.warn('deprecated thing'); "
        "t = threading.Thread(target=lambda: 1 / 0, name='worker-x'); t.start(); t.join(); "
        "raise RuntimeError('boom')"
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=REPO,
        env={**pipeline_env, "LOG_FORMAT": "json"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    records = [json.loads(line) for line in result.stderr.splitlines() if line.strip()]
    messages = [r["message"] for r in records]
    assert any("deprecated thing" in m for m in messages)
    thread_error = next(r for r in records if r["message"] == "uncaught exception in thread worker-x")
    assert "ZeroDivisionError" in thread_error["exc_info"]
    assert any(r["message"] == "uncaught exception" and "RuntimeError: boom" in r["exc_info"] for r in records)
