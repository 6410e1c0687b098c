"""The prompt registry: one Django-template file per task in settings.PROMPTS_DIR
(docs/model-layer.md#prompts-and-their-schemas).

A file has two parts separated by the line `{# input #}`: the instructions (sent as the system /
developer message, holding the `TASK: <name>` marker and the example output between `<example_output>`
tags) and the input (sent as the user message, where untrusted text sits inside delimited blocks).
The split happens on the template source, before rendering, so untrusted text can never move it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import regex
from django.conf import settings
from django.template import Context, Engine
from django.template.base import FilterExpression, Node, NodeList, Variable
from django.template.defaulttags import ForNode, WithNode
from django.template.smartif import TokenBase

from pipeline.llm.jsonparse import extract_json_object

PROMPT_NAMES: tuple[str, ...] = ("process_item", "safety", "suggest_action", "extract_keywords", "official_reply")
# What the code (pipeline.llm.tasks) passes to each template. render() refuses any other set, and the start-up
# check refuses a template that names a variable outside it (Django would render it as empty text).
PROMPT_VARIABLES: dict[str, frozenset[str]] = {
    "process_item": frozenset({"content", "hints", "url", "accept_reply", "today"}),
    "safety": frozenset({"content", "notes", "url"}),
    "suggest_action": frozenset({"content", "summary", "broadcast_type"}),
    "extract_keywords": frozenset({"name", "bio", "offers", "seeks"}),
    "official_reply": frozenset({"kind", "agent_name", "content"}),
}
# Names every template may use without being passed them: the template language's literals.
_TEMPLATE_BUILTINS = frozenset({"True", "False", "None"})
INPUT_SEPARATOR = "{# input #}"
_EXAMPLE = re.compile(r"<example_output>(.*?)</example_output>", re.DOTALL)
# Prompts are plain text for a model, not HTML: no autoescaping.
_ENGINE = Engine(autoescape=False, debug=False)
_cache: dict[Path, tuple[float, Any, Any]] = {}
# Two brackets (of one direction) followed by a third: the delimiters are runs of three.
_BRACKET_RUN = re.compile(r"<<(?=<)|>>(?=>)")
# Characters a model may read as an angle bracket: fullwidth and small forms, modifier arrowheads (U+02C2/3),
# single guillemets, CJK, mathematical and ornamental angle brackets, Canadian syllabics that draw one, and the
# double and triple less-than/greater-than signs (as the brackets they draw).
_ANGLE_BRACKETS = str.maketrans(
    {
        **dict.fromkeys("\ufe64\uff1c\u02c2\u2039\u3008\u2329\u27e8\u276c\u276e\u29fc\u1438\u3111", "<"),
        **dict.fromkeys("\ufe65\uff1e\u02c3\u203a\u3009\u232a\u27e9\u276d\u276f\u29fd\u1433", ">"),
        "\u226a": "<<",
        "\u22d8": "<<<",
        "\u00ab": "<<",
        "\u300a": "<<",
        "\u226b": ">>",
        "\u22d9": ">>>",
        "\u00bb": ">>",
        "\u300b": ">>",
    }
)
# What draws nothing between two brackets: default-ignorable code points (zero-width spaces and joiners, word
# joiner, soft hyphen, bidi controls, variation selectors, tag characters …) and the other format characters.
_INVISIBLE = regex.compile(r"[\p{Default_Ignorable_Code_Point}\p{Cf}]+")
# Combining marks drawn on a bracket leave it a bracket to a reader.
_MARKED_BRACKET = regex.compile(r"([<>])\p{M}+")


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


def _compiled(name: str) -> tuple[Any, Any]:
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
    """Neutralise block delimiters inside untrusted text so it cannot close its block and speak as us. Invisible
    characters go first (a zero-width space or soft hyphen between brackets hides a run from the check but not
    from a model), every character that reads as an angle bracket becomes the ASCII one and marks on brackets
    go; then every run of three or more brackets is broken after each second one, in one pass that cannot
    rebuild a run ("<<<<<" becomes "<< << <"), so no marker fragment survives however the brackets are nested,
    overlapped or disguised. The result is a fixed point: escaping it again changes nothing."""
    visible = _MARKED_BRACKET.sub(r"\1", _INVISIBLE.sub("", text).translate(_ANGLE_BRACKETS))
    return _BRACKET_RUN.sub(r"\g<0> ", visible)


def render(prompt_name: str, /, **context: Any) -> RenderedPrompt:
    """Render a prompt. Every string value is treated as untrusted and has its delimiters neutralised."""
    expected = PROMPT_VARIABLES.get(prompt_name, frozenset())
    if set(context) != expected:
        raise PromptError(
            f"prompt {prompt_name!r} is rendered with {sorted(context)}; PROMPT_VARIABLES declares {sorted(expected)}"
        )
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


def _expressions(value: Any) -> Iterator[FilterExpression]:
    """The filter expressions inside one node attribute (if-conditions, for sequences, with values …)."""
    if isinstance(value, FilterExpression):
        yield value
    elif isinstance(value, TokenBase):  # a parsed {% if %} condition: operators and literals
        for part in ("first", "second", "value"):
            yield from _expressions(getattr(value, part, None))
    elif isinstance(value, dict):
        for item in value.values():
            yield from _expressions(item)
    elif isinstance(value, list | tuple) and not isinstance(value, NodeList):
        for item in value:
            yield from _expressions(item)


def _roots(expression: FilterExpression) -> Iterator[str]:
    variables = [expression.var] + [arg for _, args in expression.filters for lookup, arg in args if lookup]
    for variable in variables:
        if isinstance(variable, Variable) and variable.lookups:
            yield variable.lookups[0]


def template_variables(name: str) -> set[str]:
    """The context variables a prompt's template reads (names it binds itself, with for/with, excluded)."""
    names: set[str] = set()
    bound: set[str] = set(_TEMPLATE_BUILTINS)
    for template in _compiled(name):
        for node in template.nodelist.get_nodes_by_type(Node):
            if isinstance(node, ForNode):
                bound.update([*node.loopvars, "forloop"])
            elif isinstance(node, WithNode):
                bound.update(node.extra_context)
            for value in vars(node).values():
                for expression in _expressions(value):
                    names.update(_roots(expression))
    return names - bound
