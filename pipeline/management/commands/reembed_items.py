"""`manage.py reembed_items`: move every stored vector into the configured embedding model's space.

Run it after changing LOCAL_EMBEDDING, EMBEDDING_MODEL, EMBEDDING_DIMENSIONS or the provider: vectors of two models
are not comparable, and similarity reads only the configured model's (docs/operations.md#changing-the-embedding-model).
Only rows another model made are touched, a committed batch at a time: a rerun resumes, a finished run does nothing.
"""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from eigenflux.base.embedding_space import configured_embedding_model
from pipeline.reembed import (
    Parallel,
    ReembedFailed,
    WorkerReport,
    items_to_do,
    reembed_profiles,
    reembed_range,
    split_ranges,
)

RERUN = "rerun `manage.py reembed_items` to resume: rows already re-embedded are skipped"


def pk_range(value: str) -> tuple[int, int]:
    lo, sep, hi = value.partition(":")
    if not sep or not lo.isdigit() or not hi.isdigit() or int(lo) > int(hi):
        raise ValueError(value)
    return int(lo), int(hi)


class Progress:
    """done/total, rate and ETA on stderr: rewritten in place on a terminal, a line every `every` seconds else."""

    def __init__(self, stream, *, total: int, every: float):
        self.stream, self.total = stream, total
        self.started = time.monotonic()
        self.every = every
        self.shown = 0.0
        self.tty = stream.isatty()

    def show(self, done: int, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.shown < (0.5 if self.tty else self.every):
            return
        self.shown = now
        elapsed = max(now - self.started, 1e-9)
        rate = done / elapsed
        eta = f"{(self.total - done) / rate:.0f} s" if rate > 0 else "unknown"
        share = 100.0 * done / self.total if self.total else 100.0
        line = f"re-embedding: {done}/{self.total} items ({share:.1f}%), {rate:.1f} items/s, ETA {eta}"
        self.stream.write(line, ending="\r" if self.tty else "\n")
        self.stream.flush()


class Command(BaseCommand):
    help = "Re-embed the stored vectors another embedding model made, in batches; resumable; --processes N."

    def add_arguments(self, parser):
        parser.add_argument("--batch", type=int, default=64, help="items per embedding call (default 64)")
        parser.add_argument(
            "--processes", type=int, default=1, help="worker processes, each a share of the items (default 1)"
        )
        parser.add_argument(
            "--range", type=pk_range, default=None, metavar="LO:HI", help="only items with primary keys in LO..HI"
        )
        parser.add_argument(
            "--progress-seconds", type=float, default=5.0, help="seconds between progress lines off a terminal"
        )

    def handle(self, *args, **options):
        batch, processes, bounds = options["batch"], options["processes"], options["range"]
        if batch < 1 or processes < 1:
            raise CommandError("--batch and --processes must be >= 1")
        if bounds is not None and processes > 1:
            raise CommandError("--range runs one process: start one command per range instead")
        model = configured_embedding_model()
        lo, hi = bounds or (None, None)
        total = items_to_do(model=model, lo=lo, hi=hi)
        self.stderr.write(f"{total} items to re-embed with {model}")
        progress = Progress(self.stderr, total=total, every=options["progress_seconds"])
        started = time.monotonic()
        if processes == 1 or total <= batch:
            reports = [self._one_process(model=model, batch=batch, lo=lo, hi=hi, total=total, progress=progress)]
        else:
            reports = self._processes(model=model, batch=batch, processes=processes, total=total, progress=progress)
        done = sum(report.done for report in reports)
        progress.show(done, force=True)
        for number, report in enumerate(reports, 1):
            rate = report.done / max(report.seconds, 1e-9)
            cpu = 1000.0 * report.cpu_seconds / report.done if report.done else 0.0
            self.stderr.write(
                f"process {number}: {report.done} items in {report.seconds:.1f} s, {rate:.1f} items/s, "
                f"{cpu:.1f} ms CPU/item"
            )
        profiles = 0
        if bounds is None:
            try:
                profiles = reembed_profiles(model=model)
            except ReembedFailed as exc:
                why = f"{done} items re-embedded; reader profiles failed after {exc.done}: {exc}; {RERUN}"
                raise CommandError(why) from exc
        seconds = time.monotonic() - started
        self.stderr.write(f"done in {seconds:.1f} s: {done / max(seconds, 1e-9):.1f} items/s in all")
        self.stdout.write(self.style.SUCCESS(f"re-embedded {done} items and {profiles} reader profiles with {model}"))

    def _one_process(self, *, model, batch, lo, hi, total, progress) -> WorkerReport:
        done = 0
        started, cpu = time.monotonic(), time.process_time()

        def advanced(rows: int) -> None:
            nonlocal done
            done += rows
            progress.show(done)

        try:
            reembed_range(model=model, batch=batch, lo=lo, hi=hi, progress=advanced)
        except ReembedFailed as exc:
            raise CommandError(f"embedding failed after {exc.done} of {total} items: {exc}; {RERUN}") from exc
        except KeyboardInterrupt:
            raise CommandError(f"interrupted after {done} of {total} items; {RERUN}") from None
        return WorkerReport(done, time.monotonic() - started, time.process_time() - cpu)

    def _processes(self, *, model, batch, processes, total, progress) -> list[WorkerReport]:
        workers = Parallel(model=model, batch=batch, ranges=split_ranges(model=model, parts=processes))
        workers.start()
        try:
            while workers.running():
                progress.show(workers.done())
                time.sleep(0.2)
        except KeyboardInterrupt:
            workers.stop()
            raise CommandError(f"interrupted after {workers.done()} of {total} items; {RERUN}") from None
        reports = workers.finish()
        failed = [report.error for report in reports if report.error]
        if failed or len(reports) < len(workers.processes):
            why = "; ".join(failed) or "a worker process died"
            raise CommandError(f"embedding failed after {workers.done()} of {total} items: {why}; {RERUN}")
        return reports
