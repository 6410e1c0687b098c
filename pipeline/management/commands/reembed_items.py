"""`manage.py reembed_items`: recompute every stored embedding with the embedding now configured.

Run it after changing LOCAL_EMBEDDING, EMBEDDING_MODEL or the local model: vectors from two models are not
comparable, so semantic search and similarity grouping need all items in the new model's space. Items are
embedded in batches from their content alone, as the pipeline embeds them (notes are the author's and stay out
of every vector); groups already assigned stay.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Q

from eigenflux.base.embedding_space import configured_embedding_model
from items.models import ProcessedItem
from items.services.enrichment_state import item_embeddings_store
from pipeline import llm


class Command(BaseCommand):
    help = "Recompute every stored embedding with the configured embedding model, in batches."

    def add_arguments(self, parser):
        parser.add_argument("--batch", type=int, default=64, help="items per embedding call (default 64)")

    def handle(self, *args, **options):
        if options["batch"] < 1:
            raise CommandError("--batch must be >= 1")
        stored = Q(embedding__isnull=False) | Q(pending_embedding__isnull=False)  # indexed, or a checkpoint
        rows = ProcessedItem.objects.filter(stored).order_by("pk")
        total = rows.count()
        done, last = 0, 0
        while True:
            batch = list(rows.filter(pk__gt=last).values_list("pk", "raw__content")[: options["batch"]])
            if not batch:
                break
            try:
                # The text the pipeline embeds (pipeline.enrichment_steps), so re-embedded vectors match new ones.
                vectors = llm.embed([content for _, content in batch]).value
            except llm.ModelError as exc:
                raise CommandError(f"embedding failed after {done} of {total} items: {exc}") from exc
            by_item = {pk: vector for (pk, _), vector in zip(batch, vectors, strict=True)}
            done += item_embeddings_store(vectors=by_item, model=configured_embedding_model())
            last = batch[-1][0]
            self.stdout.write(f"{done}/{total}")
        self.stdout.write(self.style.SUCCESS(f"re-embedded {done} items"))
