"""channels' Redis layer, with a receive that a cancellation always stops.

A consumer that stops (a socket refused and closed at once, a client gone) cancels its pending receive. Under
Python 3.11 that cancellation can be lost: redis-py opens the layer's connection with `asyncio.wait_for`
around its writes, and 3.11's wait_for returns the result instead of raising when the cancellation arrives
just as the write completes (CPython gh-86296, fixed in 3.12). The receive then blocks in BZPOPMIN again,
every 5 s, for ever; the consumer waits for it, and so does uvicorn's shutdown ("Waiting for background tasks
to complete") until the process is killed. Here the receive runs as a task of its own, and a cancellation is
repeated until that task has really stopped.
"""

from __future__ import annotations

import asyncio

from channels_redis.core import RedisChannelLayer as _RedisChannelLayer

_RECANCEL_SECONDS = 0.05  # between repeated cancellations of a receive that swallowed one


class RedisChannelLayer(_RedisChannelLayer):
    async def receive(self, channel):
        inner = asyncio.ensure_future(super().receive(channel))
        try:
            # shield: our own cancellation must not wait for the inner task's (which may be lost)
            return await asyncio.shield(inner)
        except asyncio.CancelledError:
            await stop_task(inner)
            raise


async def stop_task(task: asyncio.Future) -> None:
    """Cancel `task` until it is done, however many cancellations it swallows."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=_RECANCEL_SECONDS)
    if not task.cancelled():
        task.exception()  # retrieved, so not logged: the consumer is going away, a late error is of no interest
