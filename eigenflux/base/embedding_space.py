"""Which embedding model the settings configure, as the id stored beside every vector it makes (docs/architecture.md,
"Vectors and their model"). Vectors of two models are not comparable: similarity reads only the configured model's.

It lives on the ground floor because both sides need it: the pipeline stamps the vectors it writes, and the items
app filters its similarity queries and counts what `manage.py reembed_items` still has to do; items may not import
the pipeline (tests/items/test_app_boundary.py). Only settings are read, when called (override_settings works).
"""

from __future__ import annotations

from django.conf import settings

# A local embedding's space, when what the process makes of the model's output has changed since its first release:
# the id changes with it, so vectors of the old space are never compared with the new (`reembed_items` moves them).
# e5.2 (7 December 2026): the language directions are projected out (pipeline.llm.local.e5.space_vectors).
LOCAL_SPACES = {"e5": "e5.2"}


def configured_embedding_model() -> str:
    """`provider:model:dimensions`, e.g. `local:e5.2:384`, `local:minilm:384`, `openai:text-embedding-3-small:384`.
    The dimensions belong to the id: a remote model asked for fewer dimensions (EMBEDDING_SEND_DIMENSIONS) makes a
    different space, and a change of EMBEDDING_DIMENSIONS must be re-embedded too. For the remote provider the model
    name is what EMBEDDING_MODEL says; two endpoints serving different models under one name look the same here."""
    if settings.LLM_PROVIDER == "local":
        name = f"local:{LOCAL_SPACES.get(settings.LOCAL_EMBEDDING, settings.LOCAL_EMBEDDING)}"
    else:
        name = f"{settings.LLM_PROVIDER}:{settings.EMBEDDING_MODEL}"
    return f"{name}:{settings.EMBEDDING_DIMENSIONS}"


def configured_embedding_model_sql() -> str:
    """configured_embedding_model() as an SQL string literal, for statements built once in text whose placeholders
    are taken (a feed's prepared-shape reads): the id comes from settings, and quotes are doubled all the same."""
    return "'" + configured_embedding_model().replace("'", "''") + "'"
