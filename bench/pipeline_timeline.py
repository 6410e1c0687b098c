"""Where a throughput run's slot time goes (bench/pipeline_throughput.py): per item, per call, per slot.

The ideal rate assumes every one of the C slots has a model call in flight all the time; a run's ratio of ideal
is exactly the share of its slot time (C x run time) that the fake server spent holding calls (4 x N x
latency). This module splits the rest, from three clocks on this machine (all wall time):

- the fake server's record of each request (`RecordedRequest.time`, when it had read the body; it answers
  `latency` later), matched to its item by the item's content;
- the item's first decision (`ModerationDecision.created_at`, the blacklist pass made right after the claim)
  and its outcome time (`ProcessedItem.processed_at`, taken just before the outcome's statement);
- each call's LLMCall row (`latency_ms`, the handler thread's view of the call, from before it gave its database
  connection back to after the reply was parsed).

Per item: before the first call (claim to the first request), per-call overhead (the handler's latency minus
the server's), the gaps between one call's answer and the next request (the reply's hand-off, parsing, the
checkpoint, the similarity search after the embedding, the lease check), and after the last call (to the
outcome's statement). Per slot: the calls' share, the rest inside items, the time between one item's outcome and
the next item's claim, the head (slots idle before their first item) and the tail (slots left idle once every
item had started).

The steady state: items completed per second between 10 % and 90 % of the items done, beside the whole run's.
"""

from __future__ import annotations

import itertools
import re
import statistics
import time
from dataclasses import dataclass

from tests.fakes.openai_server import texts_in

_ITEM = re.compile(r"Bench (\S+) item (\d+):")


@dataclass(frozen=True)
class Timeline:
    steady_rate: float  # items/s between 10 % and 90 % done
    before_first: list[float]  # s, per item: claim to first request
    overhead: list[float]  # s, per call: handler latency - server latency
    gaps: list[float]  # s, per pair of consecutive calls: answer sent to next request received
    after_last: list[float]  # s, per item: last answer to the outcome statement
    share_calls: float  # of C x run time
    share_in_item: float  # inside an item's span, no call at the server
    share_between: float  # a slot between one item's outcome and the next claim
    share_head: float  # slots idle before their first claim (the reader's start, or --stagger)
    share_tail: float  # slots idle after the last item started


def add_entries(client, envelopes: list[dict], slots: int, stagger: float) -> None:
    """XADD the entries: all at once, or (`stagger` seconds) the first `slots` spread evenly over that time and
    the rest at once, so the slots run out of phase (as arrivals over time would leave them) instead of in
    waves whose calls all return together."""
    from items.events import STREAM_ITEM_PUBLISH

    head = envelopes[:slots] if stagger else []
    for envelope in head:
        client.xadd(STREAM_ITEM_PUBLISH, {key: str(v) for key, v in envelope.items()})
        time.sleep(stagger / len(head))
    pipe = client.pipeline(transaction=False)
    for envelope in envelopes[len(head) :]:
        pipe.xadd(STREAM_ITEM_PUBLISH, {k: str(v) for k, v in envelope.items()})
    pipe.execute()


def requests_by_item(requests: list, tag: str, ids: list[int]) -> dict[int, list[float]]:
    """The times the server received each item's requests (answered ones), in order."""
    times: dict[int, list[float]] = {}
    for request in requests:
        if request.status != 200:
            continue
        for text in texts_in(request.json.get("input")):
            match = _ITEM.search(text)
            if match and match.group(1) == tag:
                times.setdefault(ids[int(match.group(2))], []).append(request.time)
                break
    return {item: sorted(found) for item, found in times.items()}


def _item_times(ids: list[int]) -> tuple[dict[int, float], dict[int, float]]:
    from django.db.models import Min

    from items.models import ModerationDecision, ProcessedItem

    claimed = dict(
        ModerationDecision.objects.filter(item_id__in=ids)
        .values("item_id")
        .annotate(first=Min("created_at"))
        .values_list("item_id", "first")
    )
    done = dict(ProcessedItem.objects.filter(raw_id__in=ids).values_list("raw_id", "processed_at"))
    return (
        {k: v.timestamp() for k, v in claimed.items() if v is not None},
        {k: v.timestamp() for k, v in done.items() if v is not None},
    )


def _call_latencies(ids: list[int]) -> list[float]:
    from pipeline.models import LLMCall

    rows = LLMCall.objects.filter(item_id__in=ids, outcome="ok").values_list("latency_ms", flat=True)
    return [ms / 1000 for ms in rows]


def steady_rate(done_times: list[float]) -> float:
    """Items per second over the window between 10 % and 90 % of the items completed."""
    ordered = sorted(done_times)
    n = len(ordered)
    lo, hi = int(n * 0.1), max(int(n * 0.9) - 1, int(n * 0.1) + 1)
    if n < 3 or hi >= n or ordered[hi] <= ordered[lo]:
        return 0.0
    return (hi - lo) / (ordered[hi] - ordered[lo])


def _tail_idle(claimed: dict[int, float], done: dict[int, float], slots: int, end: float) -> float:
    """Slot seconds idle after the last item was claimed (no work left to start)."""
    last_claim = max(claimed.values())
    busy = sum(min(end, done[k]) - max(last_claim, claimed[k]) for k in claimed if k in done and done[k] > last_claim)
    return slots * (end - last_claim) - busy


def timeline(
    *, requests: list, tag: str, ids: list[int], latency: float, slots: int, start: float, end: float
) -> Timeline:
    """The breakdown of one run: `requests` the fake server's records of this run, `ids` the run's items in
    publish order, `slots` the number in flight, `start`/`end` the run's wall-clock window."""
    calls = requests_by_item(requests, tag, ids)
    claimed, done = _item_times(ids)
    before, gaps, after, in_item = [], [], [], 0.0
    for item, times in calls.items():
        if item not in claimed or item not in done:
            continue
        before.append(times[0] - claimed[item])
        gaps += [nxt - (prev + latency) for prev, nxt in itertools.pairwise(times)]
        after.append(done[item] - (times[-1] + latency))
        in_item += (done[item] - claimed[item]) - len(times) * latency
    slot_time = slots * (end - start)
    call_time = sum(len(times) for times in calls.values()) * latency
    span = sum(done[k] - claimed[k] for k in claimed if k in done)
    tail = _tail_idle(claimed, done, slots, end) if claimed else 0.0
    head = sum(first - start for first in sorted(claimed.values())[:slots])
    return Timeline(
        steady_rate=steady_rate(list(done.values())),
        before_first=before,
        overhead=[measured - latency for measured in _call_latencies(ids)],
        gaps=gaps,
        after_last=after,
        share_calls=call_time / slot_time,
        share_in_item=in_item / slot_time,
        share_between=max(0.0, slot_time - span - tail - head) / slot_time,
        share_head=head / slot_time,
        share_tail=tail / slot_time,
    )


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) in milliseconds; 0 for no values."""
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0] * 1000
    return statistics.quantiles(values, n=100, method="inclusive")[max(0, min(98, round(q * 100) - 1))] * 1000


def row(label: str, ratio: float, ideal: float, t: Timeline) -> str:
    """One markdown row of the breakdown table (see HEADER)."""
    return (
        f"| {label} | {ratio:.2f} | {t.steady_rate:.1f} | {t.steady_rate / ideal:.2f} | "
        f"{pct(t.before_first, 0.5):.1f} / {pct(t.before_first, 0.9):.1f} | "
        f"{statistics.fmean(t.overhead) * 1000 if t.overhead else 0:.1f} / {pct(t.overhead, 0.9):.1f} | "
        f"{pct(t.gaps, 0.5):.1f} / {pct(t.gaps, 0.9):.1f} | "
        f"{pct(t.after_last, 0.5):.1f} / {pct(t.after_last, 0.9):.1f} | "
        f"{t.share_calls:.2f} / {t.share_in_item:.2f} / {t.share_between:.2f} / {t.share_head:.2f} / "
        f"{t.share_tail:.2f} |"
    )


HEADER = (
    "| C | ratio (whole run) | steady items/s (10-90 %) | steady ratio | before 1st call ms p50 / p90 "
    "| per-call overhead ms mean / p90 | gap between calls ms p50 / p90 | after last call ms p50 / p90 "
    "| slot time: calls / in item, no call / between items / head / tail |"
)
