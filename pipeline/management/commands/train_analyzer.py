"""`manage.py train_analyzer`: train the local analyzer's learned gates on the shipped labelled posts and the
moderators' decisions, and activate the new model only if it is not worse than the active one on the held-out sets
(docs/model-layer.md, "Learned gates").

    manage.py train_analyzer                 # train, compare, activate or refuse; prints both models' figures
    manage.py train_analyzer --dry-run       # train and compare; store nothing
    manage.py train_analyzer --force         # activate even when the comparison refuses it
    manage.py train_analyzer --write-shipped # (maintainers) retrain the model shipped in the repository from the
                                             # shipped data alone, and write pipeline/llm/local/data/analyzer_gates.json
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from pipeline import analyzer_models, gate_training
from pipeline.llm.local import gates
from pipeline.moderator_labels import moderator_examples


class Command(BaseCommand):
    help = __doc__.split("\n\n")[0]

    def add_arguments(self, parser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="train and compare, store and activate nothing")
        parser.add_argument("--force", action="store_true", help="activate even when the evaluation gate refuses")
        parser.add_argument(
            "--write-shipped", action="store_true", help="retrain the shipped model from the shipped data alone"
        )

    def handle(self, *args, dry_run: bool, force: bool, write_shipped: bool, **options) -> None:
        if write_shipped:
            return self._write_shipped()
        if dry_run:
            examples = gate_training.shipped_examples() + moderator_examples()
            candidate = gate_training.train(examples, "dry-run")
            self._table(gate_training.evaluate(candidate), gate_training.evaluate(analyzer_models.active_gates()))
            self.stdout.write(f"dry run: {candidate.provenance['moderator_labels']} moderator labels; nothing stored")
            return None
        row = analyzer_models.train_and_gate(force=force)
        self._table(row.metrics, row.compared_with)
        self.stdout.write(f"analyzer model {row.pk}: {row.moderator_labels} moderator labels; {row.state}. {row.note}")
        if row.state == "refused":
            raise CommandError(f"model {row.pk} was not activated (use --force to activate it anyway)")
        return None

    def _table(self, candidate: dict, active: dict) -> None:
        self.stdout.write(f"{'held-out figure':24} {'new':>7} {'active':>7}")
        for name in sorted(set(candidate) | set(active)):
            if not isinstance(candidate.get(name, active.get(name)), float):
                continue
            self.stdout.write(f"{name:24} {candidate.get(name, 0):7.3f} {active.get(name, 0):7.3f}")

    def _write_shipped(self) -> None:
        model = gate_training.train(gate_training.shipped_examples(), "shipped")
        metrics = gate_training.evaluate(model)
        document = gates.to_document(model)
        document["metrics"] = metrics
        gates.SHIPPED_PATH.write_text(json.dumps(document) + "\n", encoding="utf-8")
        self.stdout.write(f"wrote {gates.SHIPPED_PATH}: {json.dumps(metrics)}")
