"""The prompt registry and its start-up check (docs/model-layer.md#prompts-and-their-schemas)."""

from __future__ import annotations

import json
import shutil

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from pipeline.checks import SAMPLE_CONTEXT, check_prompts
from pipeline.llm.prompts import PROMPT_NAMES, PROMPT_VARIABLES, PromptError, example_output, render, template_variables
from pipeline.llm.schemas import TASK_SCHEMAS


@pytest.fixture
def prompts_copy(settings, tmp_path):
    """A writable copy of the shipped prompts, with settings pointed at it."""
    target = tmp_path / "prompts"
    shutil.copytree(settings.BASE_DIR / "prompts", target)
    settings.PROMPTS_DIR = target
    return target


def rewrite_example(path, change):
    text = path.read_text()
    start = text.index("<example_output>") + len("<example_output>")
    end = text.index("</example_output>")
    example = change(json.loads(text[start:end]))
    path.write_text(text[:start] + "\n" + json.dumps(example) + "\n" + text[end:])


def test_shipped_prompts_pass_the_check():
    assert check_prompts() == []


@pytest.mark.parametrize("name", PROMPT_NAMES)
def test_each_prompt_has_marker_example_and_delimited_input(name):
    example = example_output(name)
    TASK_SCHEMAS[name].model_validate(example)  # the example is a valid answer, not just the right keys
    context = {**SAMPLE_CONTEXT, "content": "BROADCAST TEXT", "notes": "", "url": "", "kind": "first_broadcast"}
    rendered = render(name, **{key: context[key] for key in PROMPT_VARIABLES[name]})
    assert f"TASK: {name}" in rendered.instructions and f"TASK: {name}" in rendered.input
    assert "<<<BEGIN" in rendered.input and "<<<END" in rendered.input
    assert "{%" not in rendered.instructions + rendered.input and "{#" not in rendered.input


def test_check_fails_naming_a_lost_key(prompts_copy):
    rewrite_example(prompts_copy / "process_item.txt", lambda ex: {k: v for k, v in ex.items() if k != "geo"})
    errors = check_prompts()
    assert [e.id for e in errors] == ["eigenflux.E002"]
    assert "'process_item'" in errors[0].msg and "'geo'" in errors[0].msg


def test_check_fails_naming_a_gained_key(prompts_copy):
    rewrite_example(prompts_copy / "safety.txt", lambda ex: {**ex, "severity": 3})
    errors = check_prompts()
    assert [e.id for e in errors] == ["eigenflux.E003"]
    assert "'safety'" in errors[0].msg and "'severity'" in errors[0].msg


def test_check_fails_on_an_invalid_example_value(prompts_copy):
    rewrite_example(prompts_copy / "process_item.txt", lambda ex: {**ex, "broadcast_type": "offer"})
    assert [e.id for e in check_prompts()] == ["eigenflux.E004"]


def test_check_fails_on_a_missing_prompt_file(prompts_copy):
    (prompts_copy / "suggest_action.txt").unlink()
    errors = check_prompts()
    assert {e.id for e in errors} == {"eigenflux.E001"} and "suggest_action" in errors[0].msg


def test_manage_py_check_refuses_to_start(prompts_copy):
    rewrite_example(prompts_copy / "extract_keywords.txt", lambda ex: {"keywords": ex["keywords"]})
    with pytest.raises(SystemCheckError, match="lacks key 'country_codes'"):
        call_command("check")


# --- template variables ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", PROMPT_NAMES)
def test_each_shipped_template_uses_exactly_what_the_code_passes(name):
    assert template_variables(name) == PROMPT_VARIABLES[name]


def test_check_fails_naming_a_variable_the_code_does_not_pass(prompts_copy):
    path = prompts_copy / "suggest_action.txt"
    path.write_text(
        path.read_text().replace(
            "Reply with the JSON object only.\n",
            "Reader language: {{ reader_lang|default:locale }}.\n{% if urgency > 2 %}Hurry.{% endif %}\n"
            "{% for tag in tags %}{{ tag }} {{ forloop.counter }}{% endfor %}\n"
            "{% with short=summary|truncatewords:5 %}{{ short }}{% endwith %}\n"
            "Reply with the JSON object only.\n",
        )
    )
    errors = check_prompts()
    assert [e.id for e in errors] == ["eigenflux.E006"] * 4
    named = " ".join(e.msg for e in errors)
    for variable in ("'locale'", "'reader_lang'", "'tags'", "'urgency'"):
        assert variable in named
    assert "'tag'" not in named and "'short'" not in named and "'forloop'" not in named
    with pytest.raises(SystemCheckError, match="uses the variable 'urgency'"):
        call_command("check")


def test_render_refuses_a_context_the_declaration_does_not_match():
    with pytest.raises(PromptError, match="PROMPT_VARIABLES"):
        render("safety", content="x", notes="", url="", colour="red")
    with pytest.raises(PromptError, match="PROMPT_VARIABLES"):
        render("safety", content="x")
