"""No-op consumers on three streams for bench/cluster_throughput.py (imported by run_pipeline through
PIPELINE_EXTRA_CONSUMER_MODULES). The stream names are picked so that on a 3-master Redis Cluster with the
slots split evenly each stream lives on a different master."""

from __future__ import annotations

from redis.crc import key_slot

from pipeline.runtime import Consumer, Event, register

TYPE = "io.eigenflux.bench.v1"
_THIRD = -(-16384 // 3)


def _streams() -> list[str]:
    found: dict[int, str] = {}
    n = 0
    while len(found) < 3:
        name = f"bench:cluster:{n}"
        found.setdefault(key_slot(name.encode()) // _THIRD, name)
        n += 1
    return [found[i] for i in range(3)]


STREAMS = _streams()


class _Noop(Consumer):
    event_types = frozenset({TYPE})
    batch_size = 100
    lease_seconds = 30

    def handle(self, event: Event) -> None:
        pass


for _i, _stream in enumerate(STREAMS):
    register(
        type(f"BenchNoop{_i}", (_Noop,), {"name": f"bench-noop-{_i}", "stream": _stream, "group": f"cg:bench:{_i}"})
    )
