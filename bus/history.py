"""Reading stream history (what `nats stream view` shows), for replay and debugging, and the
few things replay does on its scratch prefix: watch it, drop it."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from nats.aio.msg import Msg
from nats.js import api
from nats.js.errors import BucketNotFoundError, NotFoundError

from bus.connection import Bus


@dataclass(frozen=True)
class Stored:
    """One stored message: where it sits and its raw payload."""

    stream: str
    seq: int
    subject: str
    data: bytes
    headers: dict[str, str]


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


async def drop_prefix(bus: Bus) -> None:
    """Delete every stream and bucket of `bus`'s prefix that exists (replay's scratch prefix:
    never call this on an instance's own prefix)."""
    for spec in bus.subjects.streams():
        with contextlib.suppress(NotFoundError):
            await bus.js.delete_stream(spec.name)
    for bucket in bus.subjects.buckets():
        with contextlib.suppress(NotFoundError, BucketNotFoundError):
            await bus.js.delete_key_value(bucket.name)


async def watch(
    bus: Bus, subject: str, handler: Callable[[str, bytes], Awaitable[None]]
) -> Callable[[], Awaitable[None]]:
    """Core-subscribe `handler(subject, data)` to `subject`; returns the unsubscribe call."""

    async def on_msg(m: Msg) -> None:
        await handler(m.subject, m.data)

    sub = await bus.nc.subscribe(subject, cb=on_msg)
    await bus.nc.flush()
    return sub.unsubscribe
