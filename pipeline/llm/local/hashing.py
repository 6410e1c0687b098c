"""Model-free text embeddings by signed feature hashing, L2-normalised; deterministic across processes and
machines (blake2b, not Python's salted hash).

- embed_text (LOCAL_EMBEDDING=hashing): word unigrams and character trigrams. Near-duplicates share almost
  all features (cosine close to 1); unrelated texts share few (low cosine).
- cjk_bigram_vector: the overlapping character bigrams of a text's Chinese, Japanese and Korean runs, the
  lexical half of the MiniLM embedding for text that model cannot read (pipeline.llm.local.embedding).
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from collections import Counter
from collections.abc import Callable

import regex

_WORD = regex.compile(r"[\p{L}\p{N}]+")
_CJK_RUN = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}ー々]+")
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


def _hashed(features: Counter[str], dimensions: int, weight_of: Callable[[str], float]) -> list[float]:
    vector = [0.0] * dimensions
    for feature, count in features.items():
        digest = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "big")
        sign = 1.0 if digest & 1 else -1.0
        vector[(digest >> 1) % dimensions] += sign * weight_of(feature) * (1.0 + math.log(count))  # sublinear tf
    return vector


def _unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(value * value for value in vector))
    if norm == 0.0:
        vector[0] = 1.0  # an empty text still gets a valid unit vector
        return vector
    return [value / norm for value in vector]


def embed_text(text: str, dimensions: int) -> list[float]:
    return _unit(_hashed(_features(text), dimensions, lambda f: WORD_WEIGHT if f.startswith("w:") else TRIGRAM_WEIGHT))


def cjk_share(text: str) -> float:
    """The share of a text's letters that are Han, Kana or Hangul (0.0 for a text without letters)."""
    letters = sum(1 for char in text if char.isalpha())
    if not letters:
        return 0.0
    return sum(len(run) for run in _CJK_RUN.findall(text)) / letters


def cjk_bigram_vector(text: str, dimensions: int) -> list[float]:
    """Hashed overlapping bigrams of the text's CJK runs (a lone character counts as itself); all zeros when the
    text has none."""
    features: Counter[str] = Counter()
    for run in _CJK_RUN.findall(unicodedata.normalize("NFKC", text)):
        for start in range(max(1, len(run) - 1)):
            features[run[start : start + 2]] += 1
    return _hashed(features, dimensions, lambda _feature: 1.0)


def embed_texts(texts: list[str], dimensions: int) -> list[list[float]]:
    return [embed_text(text, dimensions) for text in texts]
