"""Response-shape comparison for the client contract: same object keys, same JSON types, recursively (lists
must be empty exactly when the reference is; element i is compared with the reference's element i, or with
its first element when the reference is shorter). The exceptions are the item fields the client documents as
"string array, may be []" (MAY_BE_EMPTY): whether they are empty depends on what the analyzer found, not on
the contract."""

from __future__ import annotations


def json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    raise TypeError(f"not a JSON value: {value!r}")


# Item fields the wire contract types as string arrays that may be empty.
MAY_BE_EMPTY = frozenset({"domains", "keywords"})


def shape_problems(actual: object, expected: object, path: str = "$", extra: dict[str, set[str]] | None = None) -> list:
    """Every difference in shape; `extra` allows documented optional keys beyond the reference's, by path."""
    extra = extra or {}
    problems = []
    if json_type(actual) != json_type(expected):
        return [f"{path}: {json_type(actual)} where the contract has {json_type(expected)}"]
    if isinstance(expected, dict):
        missing = expected.keys() - actual.keys()
        unexpected = actual.keys() - expected.keys() - extra.get(path, set())
        problems += [f"{path}.{key}: missing" for key in sorted(missing)]
        problems += [f"{path}.{key}: not in the contract" for key in sorted(unexpected)]
        for key in expected.keys() & actual.keys():
            problems += shape_problems(actual[key], expected[key], f"{path}.{key}", extra)
    elif isinstance(expected, list):
        if not actual and path.rsplit(".", 1)[-1] in MAY_BE_EMPTY:
            pass
        elif bool(actual) != bool(expected):
            problems.append(f"{path}: {len(actual)} elements where the contract has {len(expected)}")
        elif expected:
            for index, element in enumerate(actual[:50]):
                reference = expected[index] if index < len(expected) else expected[0]
                problems += shape_problems(element, reference, f"{path}[]", extra)
    return problems


def assert_same_shape(actual: object, expected: object, extra: dict[str, set[str]] | None = None) -> None:
    problems = shape_problems(actual, expected, extra=extra)
    assert not problems, "\n".join(problems)
