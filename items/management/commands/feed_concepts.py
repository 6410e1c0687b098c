"""manage.py feed_concepts [--all]: store the lexicon concepts of completed items that have none, or (after the
search lexicon changed) of every completed item (docs/feed.md#how-fast)."""

from django.core.management.base import BaseCommand

from items.services.item_concepts import item_concepts_refresh


class Command(BaseCommand):
    help = "Store the search lexicon's concepts of completed items that have none (--all: of every completed item)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--all", action="store_true", help="recompute every item's (the lexicon changed)")

    def handle(self, *args, **options) -> None:
        written = item_concepts_refresh(everything=options["all"])
        self.stdout.write(f"{written} items' concepts stored")
