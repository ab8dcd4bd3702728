"""Reading stream history: what `nats stream view` shows, for replay and debugging."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator

from nats.js import api

from bus.connection import Bus
from bus.streams import Stored

__all__ = ["Stored", "read_stream"]


async def read_stream(
    bus: Bus, stream: str, *, since: float | None = None, subject: str = ">",
    batch: int = 256,
) -> AsyncIterator[Stored]:
    """Every message of `stream` (from time `since`, matching `subject`), oldest first."""
    cfg = api.ConsumerConfig(
        ack_policy=api.AckPolicy.NONE,
        deliver_policy=api.DeliverPolicy.BY_START_TIME if since else api.DeliverPolicy.ALL,
        opt_start_time=dt.datetime.fromtimestamp(since, dt.UTC) if since else None,
        inactive_threshold=30.0,
        filter_subject=subject if subject != ">" else None,
    )
    psub = await bus.js.pull_subscribe(subject, stream=stream, config=cfg)
    try:
        while True:
            try:
                msgs = await psub.fetch(batch, timeout=0.5)
            except TimeoutError:
                return
            for m in msgs:
                meta = m.metadata
                yield Stored(stream, meta.sequence.stream, m.subject, m.data, dict(m.headers or {}))
            if msgs and msgs[-1].metadata.num_pending == 0:
                return
    finally:
        await psub.unsubscribe()
