"""manage.py train_ranker: fit a ranker on the impression log's earlier days, measure it on the later ones, and
activate it only if it beats or matches what serves now (docs/feed-ranker.md#training)."""

from django.core.management.base import BaseCommand, CommandError

from items.ranker.training import TrainingRefused, ranker_train


def _figure(value) -> str:
    return "-" if value is None else f"{value:.4f}"


class Command(BaseCommand):
    help = (
        "Train the feed's learned ranker from the impression log and the readers' feedback: train on the earlier "
        "days, evaluate on the last --held-out-days, store the model with its provenance, self-tests and "
        "metrics, and activate it only if it beats or matches the active model (or the formula) there."
    )

    def add_arguments(self, parser):
        parser.add_argument("--days", type=int, default=28, help="Impressions of this many days back (28).")
        parser.add_argument("--held-out-days", type=int, default=1, help="The last days, held out (1).")
        parser.add_argument(
            "--skips",
            type=int,
            default=1,
            help="An item read past this often with no answer (one below it answered) is a negative (1).",
        )
        parser.add_argument("--l2", type=float, default=1.0, help="L2 regularisation of the weights (1.0).")

    def handle(self, *args, **options):
        if options["days"] < 2 or options["held_out_days"] < 1 or options["skips"] < 1 or options["l2"] < 0:
            raise CommandError("--days at least 2, --held-out-days and --skips at least 1, --l2 not negative")
        try:
            trained = ranker_train(
                days=options["days"], held_out_days=options["held_out_days"], skips=options["skips"], l2=options["l2"]
            )
        except TrainingRefused as exc:
            raise CommandError(f"nothing trained: {exc}") from exc
        model, provenance = trained.model, trained.model.document["provenance"]
        held, baseline = model.metrics["held_out"], model.metrics["baseline"]
        self.stdout.write(
            f"model {model.pk}: trained on {provenance['train']['rows']} impressions "
            f"({provenance['train']['positives']} positive), held out {provenance['held_out']['rows']} "
            f"({provenance['held_out']['positives']} positive), {provenance['ignored']} unlabelled; "
            f"data {provenance['data_hash']}, code {provenance['code_version']}"
        )
        self.stdout.write("metric       model   " + baseline["ranking"])
        for name in ("auc", "logged_ndcg", "ips"):
            self.stdout.write(f"{name:<12} {_figure(held[name]):>7} {_figure(baseline[name]):>7}")
        if trained.activated:
            self.stdout.write(self.style.SUCCESS(f"model {model.pk} is active"))
        else:
            self.stdout.write(self.style.WARNING(f"model {model.pk} stored, not activated: {trained.reason}"))
