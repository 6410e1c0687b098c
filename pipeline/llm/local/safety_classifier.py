"""The learned layer of the local safety check: logistic regression over hashed character n-grams, in numpy.

Character n-grams (single Chinese characters, pairs and triples of Chinese and Japanese; four and five letters of
other words, and the words themselves, function words skipped) read Chinese and Japanese without segmenting them.
The model is trained on first use from the labelled tuning half and the training-only cases shipped in
data/safety_train.jsonl (about two thousand broadcasts; about four seconds of CPU), so nothing is downloaded and the
shipped text is the whole of the model; it is then kept on disk (model_cache.py) and read back, in milliseconds, by
every later process until something it was trained from changes. The category a classifier-only block reports is the
nearest category centroid.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import regex

from eigenflux.base.longlived import loaded_once
from pipeline.llm.local import model_cache, safety_rules
from pipeline.llm.local.ngram_fit import DIMENSIONS, calibrated_fit, design
from pipeline.llm.local.normalise import fold
from pipeline.llm.local.safety_rules import without_benign

TRAINING_PATH = Path(__file__).resolve().parent / "data" / "safety_train.jsonl"
M = TypeVar("M")


def feature_data() -> tuple[Path, ...]:
    """The data files `features` reads (the safety lexicon's benign idioms): part of every model's cache key."""
    return (safety_rules.SAFETY_LEXICON_PATH,)


_WORD = regex.compile(r"[\p{Latin}\p{Greek}\p{Cyrillic}\p{N}]+")
_CJK_RUN = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}ー々]+")
# English function words carry no category, but the unsafe examples are full sentences and the ordinary ones
# terse, so the classifier learned "the" as evidence and judged short chatty posts unsafe ("Shoot me a message
# if you want the slides."). They are skipped, as single kana (particles) are: single characters are read for
# Chinese characters only.
STOP_WORDS = frozenset(
    {
        "a", "an", "the", "and", "or", "but", "if", "then", "so", "to", "of", "in", "on", "at", "by", "for", "from",
        "with", "as", "into", "about", "than", "is", "are", "was", "were", "be", "been", "am", "it", "its", "this",
        "that", "these", "those", "i", "me", "my", "we", "our", "you", "your", "he", "him", "his", "she", "her", "they",
        "them", "their", "there", "here", "do", "does", "did", "have", "has", "had", "will", "would", "can", "could",
        "should", "just", "not", "no", "yes", "what", "who", "when", "where", "which", "how", "all", "any", "some",
    }
)  # fmt: skip
_HAN = regex.compile(r"\p{Han}")
# Four and five letters of a word (with its edges), not three and four: English reads worse than Chinese and
# Japanese (cross-validated on the training file, AUC of unsafe against the rest 0.89 in English, 0.97 in the
# others), and three letters ("ing", " co") are shared by every kind of post. With four and five, English AUC
# 0.893 -> 0.906, Chinese and Japanese within 0.003 (docs/benchmarks.md, "A fourth pass").
LATIN_GRAMS = (4, 5)


def features(text: str) -> tuple[np.ndarray, np.ndarray]:
    """Hashed feature indices and their L2-normalised, sublinear weights for one (raw) text."""
    counts: dict[int, int] = {}
    # Read as the rules read it: folded, with the lexicon's idioms ("kill the process", "bath bomb") removed.
    folded = without_benign(fold(text))
    grams: list[str] = []
    for word in _WORD.findall(folded):
        if word in STOP_WORDS:
            continue
        grams.append(f"w:{word}")
        padded = f" {word} "
        grams.extend(padded[i : i + n] for n in LATIN_GRAMS for i in range(len(padded) - n + 1))
    for run in _CJK_RUN.findall(folded):
        grams.extend(char for char in run if _HAN.match(char))
        grams.extend(run[i : i + n] for n in (2, 3) for i in range(len(run) - n + 1))
    for gram in grams:
        index = zlib.crc32(gram.encode("utf-8")) % DIMENSIONS
        counts[index] = counts.get(index, 0) + 1
    indices = np.fromiter(counts, dtype=np.int64, count=len(counts))
    weights = np.fromiter((1.0 + math.log(c) for c in counts.values()), dtype=np.float64, count=len(counts))
    norm = float(np.sqrt(weights @ weights)) or 1.0
    return indices, weights / norm


@dataclass(frozen=True)
class SafetyClassifier:
    weights: np.ndarray
    bias: float
    centroids: np.ndarray
    categories: tuple[str, ...]

    def risk(self, text: str) -> tuple[float, str]:
        """The estimated probability that the text is unsafe, and the nearest unsafe category."""
        indices, values = features(text)
        score = float(self.weights[indices] @ values) + self.bias
        nearest = int(np.argmax(self.centroids[:, indices] @ values))
        return 1.0 / (1.0 + math.exp(-max(min(score, 30.0), -30.0))), self.categories[nearest]


def train(cases: list[dict[str, str]]) -> SafetyClassifier:
    """Fits the model on labelled cases ({"text", "label": unsafe|edgy|normal, "category"}), deterministically,
    and calibrates its scores on 4-fold out-of-fold predictions, so that its risk means what it says on
    text it has not seen."""
    rows = design([case["text"] for case in cases], features)
    target = np.array([case["label"] == "unsafe" for case in cases], dtype=np.float64)
    # Classes balanced within each language (ngram_fit.balanced_weights).
    languages = np.array([case.get("lang", "") for case in cases])
    weights, bias = calibrated_fit(rows, target, languages)
    return SafetyClassifier(weights, bias, *_centroids(cases, rows.cols, rows.vals))


def _centroids(
    cases: list[dict[str, str]], cols: tuple[np.ndarray, ...], vals: tuple[np.ndarray, ...]
) -> tuple[np.ndarray, tuple[str, ...]]:
    categories = tuple(sorted({case["category"] for case in cases if case["label"] == "unsafe"}))
    centroids = np.zeros((len(categories), DIMENSIONS), dtype=np.float32)
    for case, indices, values in zip(cases, cols, vals, strict=True):
        if case["label"] == "unsafe":
            np.add.at(centroids[categories.index(case["category"])], indices, values)
    return centroids, categories


def read_cases(path: Path) -> list[dict[str, str]]:
    """The labelled cases of a JSON-lines training file."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def trained_on(
    name: str, model_type: type[M], train: Callable[[list[dict[str, str]]], M], path: Path, module: str
) -> M:
    """A model over these features, `train` fitted on the cases of the JSON-lines file at `path`, or read from the
    model cache when one was kept for the same file, feature data and source (`module`, the model's module)."""
    return model_cache.trained(
        name, model_type, lambda: train(read_cases(path)), module=module, data=(path, *feature_data())
    )


@loaded_once("training the learned safety model")
def classifier() -> SafetyClassifier:
    """The process's model, trained from the shipped tuning half on first use, or read from the model cache."""
    return trained_on("safety", SafetyClassifier, train, TRAINING_PATH, __name__)
