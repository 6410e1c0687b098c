"""Start-up checks. Prompts (docs/model-layer.md#prompts-and-their-schemas): every prompt file exists, renders, and
carries an example output whose keys are exactly its task schema's fields and which validates against that schema. The
offline embedding: the all-MiniLM-L6-v2 package is installed and EMBEDDING_DIMENSIONS fits it."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, register
from django.core.checks import Warning as CheckWarning
from django.db import DatabaseError
from django.template import TemplateSyntaxError, VariableDoesNotExist
from pydantic import ValidationError

from eigenflux.base.embedding_space import configured_embedding_model
from items.vector_provenance import other_models
from pipeline.llm.local import e5, glossary, minilm
from pipeline.llm.prompts import (
    PROMPT_NAMES,
    PROMPT_VARIABLES,
    PromptError,
    example_output,
    prompt_path,
    render,
    template_variables,
)
from pipeline.llm.schemas import TASK_SCHEMAS

# A value for every variable any prompt is passed; each prompt is rendered with its own subset.
SAMPLE_CONTEXT = {
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
# eigenflux.E001 missing/unreadable prompt or example, E002 required key (no default) missing from the example,
# E003 unexpected key in the example, E004 example fails the schema, E005 template does not render,
# E006 template names a variable the code does not pass (it would render as empty text),
# E007 EMBEDDING_DIMENSIONS does not fit the local model, E008 the local model's package is missing,
# W004 stored vectors were made by another embedding model than the configured one.


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
        required = {key for key, field in schema.model_fields.items() if field.is_required()}  # not risk
        for key in sorted(required - example.keys()):
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
        if required <= example.keys() <= expected:
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
            unknown = sorted(template_variables(name) - PROMPT_VARIABLES[name])
            if not unknown:
                render(name, **{key: SAMPLE_CONTEXT[key] for key in PROMPT_VARIABLES[name]})
        except (PromptError, TemplateSyntaxError, VariableDoesNotExist) as exc:
            errors.append(Error(f"prompt {name!r} does not render: {exc}", obj=name, id="eigenflux.E005"))
            continue
        for variable in unknown:
            errors.append(
                Error(
                    f"prompt {name!r} uses the variable {variable!r}, which the code does not pass "
                    f"(it passes {', '.join(sorted(PROMPT_VARIABLES[name]))})",
                    hint=f"Fix the template {path}, or pass {variable!r} in pipeline/llm/tasks.py and declare it "
                    "in PROMPT_VARIABLES.",
                    obj=name,
                    id="eigenflux.E006",
                )
            )
    return errors


@register("eigenflux")
def check_e5_engine(app_configs=None, **kwargs) -> list[Error]:
    """The e5 engine's model file and the language means it needs (the engine itself loads on first use)."""
    if settings.LLM_PROVIDER != "local" or settings.LOCAL_EMBEDDING != "e5":
        return []
    try:
        e5.model_file()
        e5.language_means()
    except e5.EngineMissing as exc:
        return [Error(str(exc), hint="Run `make install`.", id="eigenflux.E010")]
    return []


@register("eigenflux")
def check_local_embedding(app_configs=None, **kwargs) -> list[Error]:
    if settings.LLM_PROVIDER != "local" or settings.LOCAL_EMBEDDING != "minilm":
        return []
    errors: list[Error] = []
    if settings.EMBEDDING_DIMENSIONS != minilm.DIMENSIONS:
        errors.append(
            Error(
                f"LOCAL_EMBEDDING=minilm makes {minilm.DIMENSIONS}-dimensional vectors, but EMBEDDING_DIMENSIONS is "
                f"{settings.EMBEDDING_DIMENSIONS}",
                hint=f"Set EMBEDDING_DIMENSIONS={minilm.DIMENSIONS}, or LOCAL_EMBEDDING=hashing.",
                id="eigenflux.E007",
            )
        )
    try:
        minilm.model_archive()  # only looks for the file; the model itself loads on first use
    except minilm.ModelFilesMissing as exc:
        errors.append(Error(str(exc), hint="Run `make install`.", id="eigenflux.E008"))
    try:
        glossary.database()  # the CJK glossary's dictionaries; parsed on first use
    except glossary.GlossaryMissing as exc:
        errors.append(Error(str(exc), hint="Run `make install`.", id="eigenflux.E009"))
    return errors


@register("eigenflux", Tags.database)
def check_embedding_provenance(app_configs=None, databases=None, **kwargs) -> list[CheckWarning]:
    """Vectors of another model than the configured one are stored (a model change not re-embedded yet, or half
    done). A warning, not an error: every similarity read compares only the configured model's vectors (the
    provenance filter), so mixed vectors cost recall (the others are invisible to search, grouping, candidates and
    match push until re-embedded), never a wrong answer; and an error would stop `migrate` (which runs the database
    checks) during the upgrade that has to come before the re-embed, and every command for the hours a large
    re-embed takes. Runs where the database is asked for: `manage.py check --database default`, and `migrate`."""
    if not databases or "default" not in databases:
        return []
    model = configured_embedding_model()
    try:
        counts = other_models(model=model)
    except DatabaseError:  # not migrated yet (the provenance column comes with items 0031), or unreachable
        return []
    if not any(counts.values()):
        return []
    found = "; ".join(
        f"{sum(by_model.values())} {name} ({', '.join(f'{other}: {rows}' for other, rows in sorted(by_model.items()))})"
        for name, by_model in counts.items()
        if by_model
    )
    return [
        CheckWarning(
            f"stored vectors were made by another embedding model than the configured {model}: {found}. "
            "Similarity leaves them out until they are re-embedded",
            hint="Run `manage.py reembed_items` (resumable; --processes N to use more cores), "
            "docs/operations.md#changing-the-embedding-model.",
            id="eigenflux.W004",
        )
    ]
