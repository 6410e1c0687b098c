"""manage.py feed_report [--days N] [--version V] [--feed F]: impressions and feedback rate by position, per day
and ranking version, from the impression log (docs/feed-log.md#the-report)."""

from django.core.management.base import BaseCommand, CommandError

from items.feed_log import ReportRow, feed_report
from items.models import FeedName

HEADER = ("day", "version", "position", "impressions", "scored", "feedback rate", "+1/+2", "-1", "acted")


def _line(cells: tuple[str, ...], widths: list[int]) -> str:
    """Text columns (day, version) left-aligned, figures right-aligned."""
    pairs = enumerate(zip(cells, widths, strict=True))
    return "  ".join(cell.ljust(width) if i < 2 else cell.rjust(width) for i, (cell, width) in pairs).rstrip()


def _cells(row: ReportRow, last_position: int) -> tuple[str, ...]:
    position = f">{last_position}" if row.position > last_position else str(row.position)
    return (
        row.day.isoformat(),
        row.ranking_version,
        position,
        str(row.impressions),
        str(row.scored),
        f"{row.feedback_rate:.1%}",
        str(row.positive),
        str(row.negative),
        str(row.acted),
    )


class Command(BaseCommand):
    help = (
        "Print, per day (UTC) and ranking version, how many items were served at each feed position and how "
        "many of those impressions their reader scored (feedback rate), scored +1/+2, scored -1, or acted on "
        "(feed events)."
    )

    def create_parser(self, prog_name, subcommand, **kwargs):
        # `--version` names a ranking version here, not Django's: the later definition replaces the base one.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("--days", type=int, default=7, help="Days to cover, today included (default 7).")
        parser.add_argument("--version", dest="ranking_version", help="Only this ranking version.")
        parser.add_argument("--feed", choices=FeedName.values, help="Only this feed.")
        parser.add_argument(
            "--positions", type=int, default=20, help="Positions listed one by one; later ones are counted together."
        )

    def handle(self, *args, days: int, ranking_version: str | None, feed: str | None, positions: int, **options):
        if days < 1 or positions < 1:
            raise CommandError("--days and --positions must be at least 1")
        rows = feed_report(days=days, version=ranking_version, feed=feed, last_position=positions)
        if not rows:
            self.stdout.write(f"no impressions in the last {days} day(s)")
            return
        table = [HEADER] + [_cells(row, positions) for row in rows]
        widths = [max(len(line[i]) for line in table) for i in range(len(HEADER))]
        for cells in table:
            self.stdout.write(_line(cells, widths))
