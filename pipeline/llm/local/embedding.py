"""The local analyzer's embedding, as LOCAL_EMBEDDING chooses.

`minilm` (the default): all-MiniLM-L6-v2, a real sentence-embedding model run in-process. It was trained on
English and reads Chinese, Japanese and Korean as a bag of unrelated characters: it scores any two Chinese
texts as similar (unrelated pairs average about 0.56 on the benchmark corpus), which would group unrelated
broadcasts and drown CJK searches in noise. So a text's vector is the model's vector blended with a hashed
vector of its CJK character bigrams, in proportion to its CJK share s:

    v = normalise( sqrt(1 - w*s) * minilm(text) + sqrt(w*s) * bigrams(text) ),  w = CJK_BLEND

English text (s = 0) gets the model's vector unchanged; Chinese text is compared mostly by shared
character pairs, plus the model's view of its Latin words and numbers. CJK_BLEND was chosen on the labelled
corpus (docs/search.md): it removed every false grouping of unrelated Chinese items and raised Chinese
semantic nDCG@10 from 0.16 to about 0.5 while leaving English unchanged.

`hashing`: feature hashing of words and character trigrams (no model; the embedding before MiniLM).
"""

from __future__ import annotations

import math

import numpy as np
from django.conf import settings

from pipeline.llm.local import hashing, minilm

CJK_BLEND = 0.7


def embed_texts(texts: list[str], dimensions: int) -> list[list[float]]:
    if settings.LOCAL_EMBEDDING == "hashing":
        return hashing.embed_texts(texts, dimensions)
    if dimensions != minilm.DIMENSIONS:
        # The start-up check (pipeline.checks) reports this too; a call must not store vectors of the wrong size.
        raise minilm.ModelFilesMissing(
            f"LOCAL_EMBEDDING=minilm makes {minilm.DIMENSIONS}-dimensional vectors but EMBEDDING_DIMENSIONS is "
            f"{dimensions}: set EMBEDDING_DIMENSIONS={minilm.DIMENSIONS} (and migrate) or LOCAL_EMBEDDING=hashing"
        )
    vectors = minilm.model().embed(texts)
    for row, text in enumerate(texts):
        share = CJK_BLEND * hashing.cjk_share(text)
        if share:
            lexical = np.asarray(hashing.cjk_bigram_vector(text, dimensions), dtype=np.float32)
            lexical /= max(float(np.linalg.norm(lexical)), 1e-12)
            blended = math.sqrt(1.0 - share) * vectors[row] + math.sqrt(share) * lexical
            vectors[row] = blended / max(float(np.linalg.norm(blended)), 1e-12)
    rows: list[list[float]] = vectors.tolist()
    return rows
