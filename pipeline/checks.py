"""Start-up check (SPEC §7.2): every prompt file exists, renders, and carries an example output whose keys
are exactly its task schema's fields and which validates against that schema."""

from __future__ import annotations

from django.core.checks import Error, register
from django.template import TemplateSyntaxError
from pydantic import ValidationError

from pipeline.llm.prompts import PROMPT_NAMES, PromptError, example_output, prompt_path, render
from pipeline.llm.schemas import TASK_SCHEMAS

_SAMPLE_CONTEXT = {
    "content": "sample",
    "notes": "sample",
    "hints": "type: info",
    "url": "https://example.com",
    "accept_reply": None,
    "today": "2026-01-01",
    "summary": "sample",
    "broadcast_type": "info",
    "name": "sample",
    "bio": "sample",
    "offers": "sample",
    "seeks": "sample",
    "kind": "welcome",
    "agent_name": "sample",
}
# eigenflux.E001 missing/unreadable prompt or example, E002 key missing from the example,
# E003 unexpected key in the example, E004 example fails the schema, E005 template does not render.


@register("eigenflux")
def check_prompts(app_configs=None, **kwargs) -> list[Error]:
    errors: list[Error] = []
    for name in PROMPT_NAMES:
        schema = TASK_SCHEMAS[name]
        path = prompt_path(name)
        try:
            example = example_output(name)
        except PromptError as exc:
            errors.append(Error(str(exc), hint=f"Fix {path}.", obj=name, id="eigenflux.E001"))
            continue
        expected = set(schema.model_fields)
        for key in sorted(expected - example.keys()):
            errors.append(
                Error(
                    f"prompt {name!r}: example output lacks key {key!r} required by {schema.__name__}",
                    hint=f"Add {key!r} to the <example_output> in {path}.",
                    obj=name,
                    id="eigenflux.E002",
                )
            )
        for key in sorted(example.keys() - expected):
            errors.append(
                Error(
                    f"prompt {name!r}: example output has key {key!r} that {schema.__name__} does not define",
                    hint=f"Remove {key!r} from {path} or add it to the schema.",
                    obj=name,
                    id="eigenflux.E003",
                )
            )
        if example.keys() == expected:
            try:
                schema.model_validate(example)
            except ValidationError as exc:
                errors.append(
                    Error(
                        f"prompt {name!r}: example output does not validate: {exc.errors()[0]['msg']}",
                        obj=name,
                        id="eigenflux.E004",
                    )
                )
        try:
            render(name, **_SAMPLE_CONTEXT)
        except (PromptError, TemplateSyntaxError) as exc:
            errors.append(Error(f"prompt {name!r} does not render: {exc}", obj=name, id="eigenflux.E005"))
    return errors
