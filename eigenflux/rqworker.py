"""The django-rq worker class (settings.RQ["WORKER_CLASS"]): rq's worker with tracing set up for the worker
role, and each job's spans exported before the forked work horse ends (it leaves with os._exit, which skips
the exit hooks that would flush a batch)."""

from __future__ import annotations

from rq import Worker

from eigenflux.base import tracing


class TracedWorker(Worker):
    def __init__(self, *args, **kwargs) -> None:
        tracing.setup("worker")
        super().__init__(*args, **kwargs)

    def perform_job(self, *args, **kwargs) -> bool:
        try:
            return super().perform_job(*args, **kwargs)
        finally:
            tracing.flush()
