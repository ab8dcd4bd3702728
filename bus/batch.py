"""Batched handling, for a durable whose handler is cheap, local and never waits on another
actor (the observer's event log): one fetch takes everything pending (up to max_ack_pending),
the handler runs on each message in order, one `after` step makes the whole batch's effect
durable (the log file flushed), and only then are the messages acked, back to back, which
nats.py puts on the socket in one write.

Per batch: one fetch, one file write, one socket write, instead of one of each per message
(with a task, a lock, a keep-alive timer and a span per message; here one keep-alive
(in_progress) covers the batch). Ack after effect holds:
a kill -9 before the acks redelivers the batch. Handlers are not run in a tracing span.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.msg import Msg as NatsMsg

from bus import logs
from bus.connection import Bus
from bus.consumer import Consumer, Handler, Subscription

log = logging.getLogger(__name__)


class BatchConsumer(Consumer):
    """A Consumer that handles each fetched batch in order in one task, then acks it."""

    def __init__(self, bus: Bus, actor: str, sub: Subscription, inbox: Any, handler: Handler,
                 after: Callable[[], Awaitable[None]]) -> None:
        super().__init__(bus, actor, sub, inbox, handler)
        self.after = after

    def _room(self) -> int:
        # Batches run one at a time, so all of max_ack_pending can be fetched at once.
        return self.sub.max_ack_pending - self._inflight

    async def _dispatch(self, msgs: list[NatsMsg]) -> None:
        # A task the fetch loop waits on: stop() gives it its grace like any handler.
        self._inflight += len(msgs)
        task = asyncio.create_task(self._batch(msgs))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        try:
            await asyncio.shield(task)
        finally:
            self._inflight -= len(msgs)

    async def _batch(self, msgs: list[NatsMsg]) -> None:
        beat = asyncio.create_task(self._keep_batch_alive(msgs))
        try:
            await self._settle(msgs)
        finally:
            beat.cancel()

    async def _keep_batch_alive(self, msgs: list[NatsMsg]) -> None:
        """A slow batch (NATS away while the handler sends) is not redelivered meanwhile."""
        while True:
            await asyncio.sleep(max(self.sub.ack_wait / 3, 0.5))
            for raw in msgs:
                if not raw.is_acked:
                    with contextlib.suppress(Exception):
                        await raw.in_progress()

    async def _settle(self, msgs: list[NatsMsg]) -> None:
        handled: list[NatsMsg] = []
        for raw in msgs:
            if await self._one(raw):
                handled.append(raw)
        if not handled:
            return
        try:
            await self.after()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - nothing acked: the batch comes again
            self.stats.failed += len(handled)
            log.warning("%s could not finish a batch of %d (%s); it is delivered again",
                        self.actor, len(handled), exc)
            for raw in handled:
                await raw.nak(delay=1.0)
            return
        for raw in handled:  # no await in between yields: one socket write for all
            await raw.ack()
        self.stats.handled += len(handled)

    async def _one(self, raw: NatsMsg) -> bool:
        """Handle one message of the batch; True when it is to be acked after the batch."""
        meta = raw.metadata
        deliveries = meta.num_delivered
        token = logs.bind(actor=self.actor, subject=raw.subject, seq=meta.sequence.stream,
                          delivery=deliveries)
        try:
            msg = await self._admit(raw, deliveries)
            if msg is None:
                return False
            await self.handler(msg)
            return True
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failing handler must not kill the actor
            await self._failed(raw, exc, deliveries)  # as for one message at a time
        finally:
            logs.reset(token)
        return False
