"""The services a run_pipeline process runs beside its consumers, handed to the stream engine's Supervisor: the
outbox relay and housekeeping (trimming, the stranded-item sweeper, consumer pruning, lag gauges)."""

from __future__ import annotations

from pipeline.housekeeping import Housekeeper
from pipeline.relay import OutboxRelay
from pipeline.runtime.consumer import Consumer
from pipeline.runtime.supervisor import Service

BURST_RELAY_POLL_SECONDS = 0.05  # --burst: the relay looks again quickly, so the run ends soon after the work


def pipeline_services(
    consumers: list[type[Consumer]], *, relay: bool = True, housekeeping: bool = True, burst: bool = False
) -> list[Service]:
    """The relay unless told not to; housekeeping unless told not to or in a --burst run (which ends)."""
    services: list[Service] = []
    if relay:
        services.append(OutboxRelay(poll_seconds=BURST_RELAY_POLL_SECONDS if burst else None))
    if housekeeping and not burst:
        services.append(Housekeeper({cls.stream for cls in consumers}))
    return services
