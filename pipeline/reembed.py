"""Re-embedding stored vectors with the configured embedding model (`manage.py reembed_items`,
docs/operations.md#changing-the-embedding-model): only rows another model made, in batches each committed on its own,
so a rerun resumes where a failure or Ctrl-C stopped and a finished run finds nothing; optionally split by primary key
across worker processes, each with its own database connection.

Items are embedded from their content alone, as the pipeline embeds them (notes are the author's and stay out of every
vector); groups already assigned stay. Reader profiles are embedded again from the profile text the consumer reads.
"""

from __future__ import annotations

import multiprocessing
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.db import connections

from items.models import Agent
from items.services.enrichment_state import item_embeddings_store
from items.services.profiles import reader_vectors_replace
from items.vector_provenance import items_to_reembed, profiles_to_reembed
from pipeline import llm
from pipeline.consumers.profile_update import reader_vectors

Progress = Callable[[int], None]


class ReembedFailed(Exception):
    """The model failed mid-way; `done` rows were re-embedded (and stay so) before it did."""

    def __init__(self, message: str, *, done: int):
        super().__init__(message)
        self.done = done


@dataclass(frozen=True)
class WorkerReport:
    """One worker's share: rows re-embedded, wall and CPU seconds it took, and the model's error if it stopped."""

    done: int
    seconds: float
    cpu_seconds: float
    error: str = ""


def items_to_do(*, model: str, lo: int | None = None, hi: int | None = None) -> int:
    rows = items_to_reembed(model=model)
    if lo is not None:
        rows = rows.filter(pk__gte=lo)
    if hi is not None:
        rows = rows.filter(pk__lte=hi)
    return rows.count()


def split_ranges(*, model: str, parts: int) -> list[tuple[int, int]]:
    """Inclusive primary-key ranges holding about the same number of rows still to re-embed, at most `parts` of
    them (fewer when there are fewer rows)."""
    pks = items_to_reembed(model=model).order_by("pk").values_list("pk", flat=True)
    total = pks.count()
    if total == 0:
        return []
    parts = max(1, min(parts, total))
    starts = [pks[total * i // parts] for i in range(parts)]  # one indexed OFFSET read each
    last = pks.reverse()[0]
    return [(start, (starts[i + 1] - 1) if i + 1 < parts else last) for i, start in enumerate(starts)]


def reembed_range(
    *, model: str, batch: int, lo: int | None = None, hi: int | None = None, progress: Progress | None = None
) -> int:
    """Re-embed the items of another model with primary keys in [lo, hi], `batch` per model call, each batch
    committed with the rows' new model; returns how many rows were rewritten. Raises ReembedFailed."""
    rows = items_to_reembed(model=model).order_by("pk")
    if hi is not None:
        rows = rows.filter(pk__lte=hi)
    done, last = 0, (lo - 1 if lo is not None else None)
    while True:
        page = rows if last is None else rows.filter(pk__gt=last)
        chunk = list(page.values_list("pk", "raw__content")[:batch])
        if not chunk:
            return done
        try:
            # The text the pipeline embeds (pipeline.enrichment_steps), so re-embedded vectors match new ones.
            vectors = llm.embed([content for _, content in chunk]).value
        except llm.ModelError as exc:
            raise ReembedFailed(f"{exc.__class__.__name__}: {exc}", done=done) from exc
        by_item = {pk: vector for (pk, _), vector in zip(chunk, vectors, strict=True)}
        stored = item_embeddings_store(vectors=by_item, model=model)
        done += stored
        last = chunk[-1][0]
        if progress is not None:
            progress(stored)


def reembed_profiles(*, model: str) -> int:
    """Re-embed the reader profiles of another model, one model call per profile (its sides and their clauses, as
    the profile consumer embeds them); a profile rewritten meanwhile by the consumer is left as it is."""
    done = 0
    for profile in profiles_to_reembed(model=model).select_related("agent").order_by("pk").iterator():
        agent: Agent = profile.agent
        try:
            vectors = reader_vectors(agent)
        except llm.ModelError as exc:
            raise ReembedFailed(f"{exc.__class__.__name__}: {exc}", done=done) from exc
        done += reader_vectors_replace(
            agent_id=agent.pk,
            version=profile.version,
            model=model,
            seeks=vectors.seeks,
            offers=vectors.offers,
            seeks_parts=vectors.seeks_parts,
            offers_parts=vectors.offers_parts,
        )
    return done


def _no_connection_across_fork() -> None:
    """Close this process's connections and its connection pools (psycopg_pool: their sockets and threads), so a
    forked worker opens its own and shares no socket with the parent; the parent's pool is built again when used."""
    from django.db.backends.postgresql.base import DatabaseWrapper

    connections.close_all()
    pools = getattr(DatabaseWrapper, "_connection_pools", {})  # Django's (private) pools by alias, built on first use
    for wrapper in connections.all(initialized_only=True):
        if isinstance(wrapper, DatabaseWrapper) and wrapper.alias in pools:
            wrapper.close_pool()


def _worker(model: str, batch: int, lo: int, hi: int, counter, reports) -> None:
    """A forked worker: a fresh connection (the parent closed its own before forking), its range, its report."""
    connections.close_all()
    started, cpu = time.monotonic(), time.process_time()

    def progress(rows: int) -> None:
        with counter.get_lock():
            counter.value += rows

    done, error = 0, ""
    try:
        done = reembed_range(model=model, batch=batch, lo=lo, hi=hi, progress=progress)
    except ReembedFailed as exc:
        done, error = exc.done, str(exc)
    except KeyboardInterrupt:  # the parent reports it; the batch under way was rolled back
        error = "interrupted"
    finally:
        connections.close_all()
    reports.put(WorkerReport(done, time.monotonic() - started, time.process_time() - cpu, error))


@dataclass
class Parallel:
    """Worker processes over `ranges`, with the shared count of rows done (updated as each batch commits)."""

    model: str
    batch: int
    ranges: list[tuple[int, int]]

    def start(self) -> None:
        context = multiprocessing.get_context("fork")  # the workers inherit settings (and a test's database name)
        self.counter = context.Value("q", 0)
        self.reports = context.Queue()
        _no_connection_across_fork()
        self.processes = [
            context.Process(target=_worker, args=(self.model, self.batch, lo, hi, self.counter, self.reports))
            for lo, hi in self.ranges
        ]
        for process in self.processes:
            process.start()

    def done(self) -> int:
        return int(self.counter.value)

    def running(self) -> bool:
        return any(process.is_alive() for process in self.processes)

    def finish(self) -> list[WorkerReport]:
        """Collect each worker's report, then join it (in this order: a worker exits only once its report left
        the queue). A worker killed before reporting has none; what it committed is counted by done()."""
        reports = []
        for _ in self.processes:
            try:
                reports.append(self.reports.get(timeout=5))
            except queue.Empty:
                break
        for process in self.processes:
            process.join(10)
        return reports

    def stop(self) -> None:
        for process in self.processes:
            if process.is_alive():
                process.terminate()
        for process in self.processes:
            process.join(10)
