"""The channel layer's receive stops when cancelled, at whatever point the cancellation meets it (under Python
3.11 one that met redis-py opening the layer's connection was lost, and the receive blocked for ever)."""

from __future__ import annotations

import asyncio

from channels.layers import channel_layers, get_channel_layer

MOMENTS = 40  # event-loop turns after the start at which the receive is cancelled: connecting, sending, blocking


def test_a_cancelled_receive_stops_wherever_the_cancellation_meets_it(settings):
    async def cancelled_after(turns: int) -> str:
        channel_layers.backends.clear()  # a fresh layer: no connection yet, so the cancellation may meet the connect
        layer = get_channel_layer()
        receive = asyncio.ensure_future(layer.receive(await layer.new_channel()))
        for _ in range(turns):
            await asyncio.sleep(0)
        receive.cancel()
        done, _ = await asyncio.wait({receive}, timeout=10)  # a hang guard: a stopped receive ends at once
        if not done:
            receive.cancel()  # let the loop close; the assertion below reports the failure
            return f"still running {turns} turns in"
        return "cancelled" if receive.cancelled() else f"ended otherwise {turns} turns in"

    async def every_moment() -> list[str]:
        return [await cancelled_after(turns) for turns in range(MOMENTS)]

    try:
        outcomes = asyncio.run(every_moment())
    finally:
        channel_layers.backends.clear()
    assert outcomes == ["cancelled"] * MOMENTS
