"""Do labels written apart teach the learned gates? Trains the gates (pipeline.gate_training) on the analyzer's own
training posts alone, and on them plus development fresh sets (written apart from the analyzer, labelled by their
writers: --train, default those the shipped gates learn from, gate_data.APART_SETS) at --weight each, and runs the
whole analyzer with both on the test sets (--report, default the sixth, seventh, eighth, eleventh and fifteenth): unsafe
stopped (blocked or held), edgy passed, spam blocked, normal passed (bench.review_queue.outcome, as
`analyzer_quality --freshN`), then each layer's ROC AUC alone on its own question. To choose the weight, hold a
development set out of --train and report on it.

--layers names the layers the written-apart posts teach (default gate_data.APART_LAYERS, as the shipped gates); in
the safety gate every fresh post is an example (unsafe against the rest); in the spam gate the non-unsafe
ones (spam against edgy and normal). Their e5 vectors and n-gram estimates are computed once per run (about
100 s of CPU for 2,200 posts; the n-grams never trained on them).

    .venv/bin/python -m bench.gates_apart [--weight 3] [--train fresh,fresh2] [--report fresh6,fresh7,fresh8] \\
        [--layers spam,stance,safety]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
os.environ["LLM_PROVIDER"] = "local"

import django
import numpy as np

django.setup()

from bench import fresh_set  # noqa: E402
from bench.review_queue import outcome  # noqa: E402
from items.ranker.fit import auc  # noqa: E402
from pipeline import gate_training  # noqa: E402
from pipeline.llm.local import e5, gate_data, gates  # noqa: E402
from pipeline.llm.local.safety_classifier import classifier as safety_ngrams  # noqa: E402
from pipeline.llm.local.spam_classifier import classifier as spam_ngrams  # noqa: E402


def with_features(texts: list[str]) -> dict[str, tuple]:
    """The shipped features file and the texts' features, by text key (so training embeds nothing twice)."""
    known = gate_data.load_features()
    new = sorted({text for text in texts if gate_data.text_key(text) not in known})
    vectors = [vector for start in range(0, len(new), 64) for vector in e5.vectors(new[start : start + 64])]
    safety, spam = safety_ngrams(), spam_ngrams()
    for text, vector in zip(new, vectors, strict=True):
        known[gate_data.text_key(text)] = (vector, safety.risk(text)[0], spam.probability(text))
    return known


def figures(model: gates.GateModel, cases: list[dict[str, str]]) -> str:
    with gates.using(model):
        return " | ".join(fresh_set.label_rates(cases, outcome))


# Each layer's own question: which posts count as its positives and which as its negatives (label sets).
LAYER_QUESTIONS = {
    "safety": ({"unsafe"}, {"edgy", "spam", "normal"}),
    "stance": ({"unsafe"}, {"edgy"}),
    "spam": ({"spam"}, {"edgy", "normal"}),
    "topic": ({"unsafe", "edgy"}, {"spam", "normal"}),
}


def feature_rows(cases: list[dict[str, str]], known: dict[str, tuple]) -> np.ndarray:
    """The gates' feature row of each case, from its precomputed vector (one per case, whichever layer reads it)."""
    return np.array(
        [
            gates.feature_row(known[gate_data.text_key(case["text"])][0], gates.scalar_features(case["text"]))
            for case in cases
        ]
    )


def layer_aucs(model: gates.GateModel, cases: list[dict[str, str]], rows: np.ndarray) -> str:
    """How well each layer alone separates its positives from its negatives on `cases` (ROC AUC; `rows`: their
    feature rows, feature_rows): what the layers know, apart from how the analyzer decides with them."""
    labels = np.array([case["label"] for case in cases])
    cells = []
    for layer, (positive, negative) in LAYER_QUESTIONS.items():
        chosen = np.isin(labels, list(positive | negative))
        scores = np.array([getattr(model, layer).probability(row) for row in rows[chosen]])
        found = auc(scores, np.isin(labels[chosen], list(positive)).astype(int))
        cells.append(f"{layer} {found:.3f}" if found is not None else f"{layer} -")
    return ", ".join(cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    shipped = ",".join(name for name, path in fresh_set.FRESH_SETS.items() if path in gate_data.APART_SETS)
    parser.add_argument("--weight", type=float, default=gate_data.APART_WEIGHT, help="each written-apart post's weight")
    parser.add_argument("--train", default=shipped, help=f"sets trained on ({shipped})")
    parser.add_argument("--report", default="fresh6,fresh7,fresh8,fresh11,fresh15,fresh16", help="sets reported")
    layers = ",".join(gate_data.APART_LAYERS)
    parser.add_argument("--layers", default=layers, help=f"the layers the written-apart posts teach ({layers})")
    args = parser.parse_args()
    train = [case for name in args.train.split(",") for case in fresh_set.load_fresh(fresh_set.FRESH_SETS[name])]
    report = {name: fresh_set.load_fresh(fresh_set.FRESH_SETS[name]) for name in args.report.split(",")}
    known = with_features([case["text"] for case in [*train, *(case for cases in report.values() for case in cases)]])
    apart = [
        example
        for example in gate_training.labelled_examples(train, args.weight, "apart")
        if example.gate in args.layers.split(",")  # by default, as the shipped gates learn from them
    ]
    own = gate_training.train(gate_training.own_examples(), "own", known)
    learned = gate_training.train(gate_training.own_examples() + apart, "apart", known)
    print(
        f"gates trained on the analyzer's own posts, and + {args.train} at weight {args.weight} ({len(train)} posts)"
        f" teaching {args.layers}"
    )
    print("| set | gates | unsafe stopped | edgy passed | spam blocked | normal passed |")
    print("|---|---|---|---|---|---|")
    for name, cases in report.items():
        print(f"| {name} | own posts | {figures(own, cases)} |")
        print(f"| {name} | + written apart | {figures(learned, cases)} |")
    print("\nEach layer alone, ROC AUC (safety: unsafe against the rest; stance: unsafe against edgy; spam: spam")
    print("against edgy and normal), with the gates trained on the analyzer's own posts, then + written apart:")
    for name, cases in report.items():
        rows = feature_rows(cases, known)
        print(f"  {name}: {layer_aucs(own, cases, rows)}; + written apart: {layer_aucs(learned, cases, rows)}")


if __name__ == "__main__":
    main()
