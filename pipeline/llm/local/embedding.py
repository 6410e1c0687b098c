"""A local text embedding: signed feature hashing of word unigrams and character trigrams, L2-normalised.

Near-duplicates share almost all features (cosine close to 1); unrelated texts share few (low cosine).
Deterministic across processes and machines (blake2b, not Python's salted hash).
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from collections import Counter

import regex

_WORD = regex.compile(r"[\p{L}\p{N}]+")
WORD_WEIGHT = 1.0
TRIGRAM_WEIGHT = 0.35


def _features(text: str) -> Counter[str]:
    normal = unicodedata.normalize("NFKC", text).casefold()
    features: Counter[str] = Counter()
    for word in _WORD.findall(normal):
        features[f"w:{word}"] += 1
        padded = f" {word} "
        for start in range(len(padded) - 2):
            features[f"c:{padded[start : start + 3]}"] += 1
    return features


def embed_text(text: str, dimensions: int) -> list[float]:
    vector = [0.0] * dimensions
    for feature, count in _features(text).items():
        digest = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "big")
        sign = 1.0 if digest & 1 else -1.0
        weight = WORD_WEIGHT if feature.startswith("w:") else TRIGRAM_WEIGHT
        vector[(digest >> 1) % dimensions] += sign * weight * (1.0 + math.log(count))  # sublinear term frequency
    norm = math.sqrt(sum(value * value for value in vector))
    if norm == 0.0:
        vector[0] = 1.0  # an empty text still gets a valid unit vector
        return vector
    return [value / norm for value in vector]


def embed_texts(texts: list[str], dimensions: int) -> list[list[float]]:
    return [embed_text(text, dimensions) for text in texts]
