"""The prompt registry: one Django-template file per task in settings.PROMPTS_DIR (SPEC §7.2).

A file has two parts separated by the line `{# input #}`: the instructions (sent as the system /
developer message, holding the `TASK: <name>` marker and the example output between `<example_output>`
tags) and the input (sent as the user message, where untrusted text sits inside delimited blocks).
The split happens on the template source, before rendering, so untrusted text can never move it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.template import Context, Engine

from pipeline.llm.jsonparse import extract_json_object

PROMPT_NAMES: tuple[str, ...] = ("process_item", "safety", "suggest_action", "extract_keywords", "official_reply")
INPUT_SEPARATOR = "{# input #}"
_EXAMPLE = re.compile(r"<example_output>(.*?)</example_output>", re.DOTALL)
# Prompts are plain text for a model, not HTML: no autoescaping.
_ENGINE = Engine(autoescape=False, debug=False)
_cache: dict[Path, tuple[float, Any, Any]] = {}


class PromptError(Exception):
    """A prompt file is missing or malformed."""


@dataclass(frozen=True)
class RenderedPrompt:
    name: str
    instructions: str
    input: str


def prompts_dir() -> Path:
    return Path(settings.PROMPTS_DIR)


def prompt_path(name: str) -> Path:
    return prompts_dir() / f"{name}.txt"


def prompt_source(name: str) -> str:
    path = prompt_path(name)
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PromptError(f"prompt {name!r}: cannot read {path}: {exc.strerror}") from None


def split_source(name: str, source: str) -> tuple[str, str]:
    if source.count(INPUT_SEPARATOR) != 1:
        raise PromptError(f"prompt {name!r} must contain the line {INPUT_SEPARATOR} exactly once")
    instructions, user_input = source.split(INPUT_SEPARATOR)
    return instructions, user_input


def _compiled(name: str):
    path = prompt_path(name)
    try:
        mtime = path.stat().st_mtime
    except OSError:
        mtime = -1.0
    cached = _cache.get(path)
    if cached and cached[0] == mtime:
        return cached[1], cached[2]
    instructions, user_input = split_source(name, prompt_source(name))
    templates = (_ENGINE.from_string(instructions), _ENGINE.from_string(user_input))
    _cache[path] = (mtime, *templates)
    return templates


def untrusted(text: str) -> str:
    """Neutralise block delimiters inside untrusted text so it cannot close its block and speak as us."""
    return text.replace("<<<", "<< <").replace(">>>", "> >>")


def render(prompt_name: str, /, **context: Any) -> RenderedPrompt:
    """Render a prompt. Every string value is treated as untrusted and has its delimiters neutralised."""
    safe_context = {key: untrusted(value) if isinstance(value, str) else value for key, value in context.items()}
    instructions_tpl, input_tpl = _compiled(prompt_name)
    ctx = Context(safe_context, autoescape=False)
    return RenderedPrompt(
        name=prompt_name,
        instructions=instructions_tpl.render(ctx).strip(),
        input=input_tpl.render(ctx).strip(),
    )


def example_output(name: str) -> dict[str, Any]:
    """The example output a prompt carries, parsed with the same strict extractor used for replies."""
    source = prompt_source(name)
    matches = _EXAMPLE.findall(source)
    if len(matches) != 1:
        raise PromptError(f"prompt {name!r} must hold exactly one <example_output> block, found {len(matches)}")
    try:
        return extract_json_object(matches[0])
    except ValueError as exc:
        raise PromptError(f"prompt {name!r}: example output is not one JSON object ({exc})") from None
