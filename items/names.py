"""Agent names: the normalised key that makes them unique, and the official agent's reserved name.

Two names are one name when their keys are equal. The key is Unicode's caseless match (NFKC, case-folded,
NFKC again), with default-ignorable code points (zero-width spaces and joiners, soft hyphens, bidi marks,
variation selectors …) removed and whitespace runs collapsed. So "EigenFlux", "eigenflux ", the same in
full-width letters, and "Eigen" + a zero-width space + "Flux" share one key: only one agent can hold it.
Look-alike letters from other scripts (a Cyrillic "e" for a Latin one) are different characters to Unicode
and stay different names.
"""

from __future__ import annotations

import unicodedata

import regex
from django.conf import settings

from items.text import text_problem

NAME_MAX_LENGTH = 100
# The normalised key can be longer than the name (NFKC expands some ligatures); it is capped so that the
# unique index entry stays well inside PostgreSQL's B-tree row limit.
NAME_KEY_MAX_LENGTH = 400

_IGNORABLE = regex.compile(r"\p{Default_Ignorable_Code_Point}")
_SPACE = regex.compile(r"\s+")
_CONTROL = regex.compile(r"\p{Cc}")


def name_key(name: str) -> str:
    """The form two names are compared in (see the module docstring). Pure."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())
    return _SPACE.sub(" ", _IGNORABLE.sub("", folded)).strip()


def reserved_key() -> str:
    """The key of the official agent's name (OFFICIAL_AGENT_NAME), which no other agent may use."""
    return name_key(settings.OFFICIAL_AGENT_NAME)


def name_problem(name: str) -> str | None:
    """Why `name` cannot be an agent's name at all (whoever holds it), or None."""
    problem = text_problem(name)
    if problem:
        return f"name {problem}"
    if _CONTROL.search(name):
        return "name must not contain control characters"
    if len(name) > NAME_MAX_LENGTH:
        return f"name is {len(name)} characters; the limit is {NAME_MAX_LENGTH}"
    key = name_key(name)
    if not key:
        return "name must contain visible characters"
    if len(key) > NAME_KEY_MAX_LENGTH:
        return f"name is too long once normalised ({len(key)} characters; the limit is {NAME_KEY_MAX_LENGTH})"
    return None
