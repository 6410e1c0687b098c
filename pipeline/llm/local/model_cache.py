"""The learned models of the local analyzer, kept on disk once trained (docs/model-layer.md, "Trained once, kept on
disk").

Training the n-gram models (safety_classifier.py, spam_classifier.py, type_classifier.py) costs seconds of CPU in
every process that judges; reading their weights back costs milliseconds. A model is kept in
LOCAL_MODEL_CACHE_DIR as one .npz file (numpy arrays only, read without pickle) named by a content key: the SHA-256
of everything its training reads — the data files (the training file, the lexicon the features read), the source
of the model's module and of every project module it imports, directly or not (the features, the fit), numpy's,
regex's and Unicode's versions and the hashing dimensions. Anything that could change the model changes the key, so
a stale file is never read: it is simply not the one asked for.

The cache only ever saves time. A missing, unreadable, truncated or foreign file is ignored (a warning, then the
model is trained and the file written again); a directory that cannot be created or written leaves the model
trained in memory, as before. Files are written to a temporary name and renamed into place, so a reader never sees
half a file and two processes writing the same model at once both succeed (with the same bytes).
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import logging
import os
import sys
import tempfile
import time
import unicodedata
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import regex

from pipeline.llm.local.ngram_fit import DIMENSIONS

log = logging.getLogger(__name__)
# Bumped when the file layout changes.
FORMAT = 1
_KEY_FIELD = "__key__"
KEY_CHARS = 32  # of the key's hex digest in a file's name (the whole key is inside)
# The project's own packages: their modules' source is part of a model's key.
_PROJECT = ("pipeline", "eigenflux", "items")
_STALE_TEMP_SECONDS = 3600
M = TypeVar("M")


def cache_dir() -> Path | None:
    """LOCAL_MODEL_CACHE_DIR, or None outside a configured Django (a script that did not set it up)."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    try:
        return Path(settings.LOCAL_MODEL_CACHE_DIR)
    except (ImproperlyConfigured, AttributeError):
        return None


def _imported(path: Path, package: str) -> set[str]:
    """The project modules a module's source imports (packages' own __init__ aside: importing a package runs its
    __init__, which reads nothing the model depends on)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], base]).strip(".")
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return {name for name in names if name.split(".")[0] in _PROJECT and _module_file(name) is not None}


def _module_file(name: str) -> Path | None:
    """The source file of a project module that is not a package, or None."""
    module = sys.modules.get(name)
    if module is None or hasattr(module, "__path__") or not getattr(module, "__file__", None):
        return None
    return Path(module.__file__)  # type: ignore[arg-type]


def sources_of(module: str) -> list[Path]:
    """The source files of a module and of every project module it imports, directly or not, sorted."""
    seen: dict[str, Path] = {}
    pending = [module]
    while pending:
        name = pending.pop()
        path = _module_file(name)
        if name in seen or path is None:
            continue
        seen[name] = path
        pending.extend(_imported(path, name.rpartition(".")[0]))
    return sorted(seen.values())


def content_key(name: str, data: Iterable[Path], sources: Iterable[Path]) -> str:
    """The SHA-256 of everything a model's training reads (see the module docstring)."""
    digest = hashlib.sha256()
    versions = (FORMAT, name, DIMENSIONS, np.__version__, regex.__version__, unicodedata.unidata_version)
    digest.update(repr((*versions, sys.version_info[:2])).encode())
    for kind, paths in (("data", data), ("source", sources)):
        for path in paths:
            content = path.read_bytes()
            digest.update(f"\0{kind}\0{path.name}\0{len(content)}\0".encode())
            digest.update(content)
    return digest.hexdigest()


def _to_arrays(model: Any) -> dict[str, np.ndarray]:
    return {field.name: np.asarray(getattr(model, field.name)) for field in dataclasses.fields(model)}


def _from_arrays(model_type: type[M], arrays: dict[str, np.ndarray]) -> M:
    """The model from its arrays: a 0-d array is a float, an array of strings a tuple, the rest stay arrays."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(model_type):  # type: ignore[arg-type]
        array = arrays[field.name]
        if array.ndim == 0:
            values[field.name] = array.item()
        elif array.dtype.kind == "U":
            values[field.name] = tuple(str(value) for value in array)
        else:
            values[field.name] = array
    return model_type(**values)


def _read(path: Path, key: str, model_type: type[M]) -> M | None:
    """The model in the file, or None when there is none; a file that is not this model's is warned of."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            arrays = {name: stored[name] for name in stored.files}
        expected = {field.name for field in dataclasses.fields(model_type)} | {_KEY_FIELD}  # type: ignore[arg-type]
        if set(arrays) != expected or str(arrays[_KEY_FIELD]) != key:
            raise ValueError("not the model this key names")
        return _from_arrays(model_type, arrays)
    except FileNotFoundError:
        return None
    except Exception as error:  # whatever is wrong with the file, training gives the model
        log.warning("model cache: ignoring %s (%s: %s); training the model again", path, type(error).__name__, error)
        return None


def _write(folder: Path, name: str, path: Path, key: str, model: Any) -> None:
    """Writes the model under a temporary name, then renames it into place; a failure is a warning."""
    temporary = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}-", suffix=".tmp")
        with os.fdopen(handle, "wb") as file:
            arrays: dict[str, Any] = {**_to_arrays(model), _KEY_FIELD: np.asarray(key)}
            np.savez(file, **arrays)
        os.replace(temporary, path)
    except Exception as error:  # the model is trained; not keeping it costs time only
        log.warning("model cache: could not write %s (%s: %s)", path, type(error).__name__, error)
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
        return
    _prune(folder, name, path)


def _prune(folder: Path, name: str, kept: Path) -> None:
    """Removes the model's files of other keys (trained from what has since changed) and temporary files a
    killed writer left behind."""
    now = time.time()
    try:
        for other in folder.glob(f"{name}-{'[0-9a-f]' * KEY_CHARS}.npz"):
            if other != kept:
                other.unlink(missing_ok=True)
        for temporary in folder.glob(f".{name}-*.tmp"):
            if now - temporary.stat().st_mtime > _STALE_TEMP_SECONDS:
                temporary.unlink(missing_ok=True)
    except OSError as error:
        log.debug("model cache: could not prune %s: %s", folder, error)


def trained(name: str, model_type: type[M], train: Callable[[], M], *, module: str, data: Iterable[Path]) -> M:
    """The model `train` gives, read from the cache when one was kept for exactly these inputs, else trained and
    kept. `module` is the model's module (its source and its project imports are part of the key), `data` the
    files its training and its features read."""
    folder = cache_dir()
    if folder is None:
        return train()
    try:
        key = content_key(name, data, sources_of(module))
    except Exception as error:  # no key, no cache: train as before
        log.warning("model cache: no key for the %s model (%s: %s)", name, type(error).__name__, error)
        return train()
    path = folder / f"{name}-{key[:KEY_CHARS]}.npz"
    cached = _read(path, key, model_type)
    if cached is not None:
        log.info("model cache: read the %s model from %s", name, path)
        return cached
    started = time.process_time()
    model = train()
    log.info(
        "model cache: trained the %s model (%.2f s CPU), keeping it in %s", name, time.process_time() - started, path
    )
    _write(folder, name, path, key, model)
    return model
