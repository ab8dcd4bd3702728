"""Stream and core-NATS helpers of the Bus: stream counts, single stored messages, core
subscriptions, and deleting scratch streams and buckets (replay)."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError


@dataclass(frozen=True)
class Stored:
    """One stored message: where it sits and its raw payload."""

    stream: str
    seq: int
    subject: str
    data: bytes
    headers: dict[str, str]


@dataclass(frozen=True)
class StreamState:
    """How much a stream holds and which sequence numbers it spans."""

    messages: int
    bytes: int
    first_seq: int
    last_seq: int


@dataclass(frozen=True)
class Delivery:
    """A message from a core subscription (not acknowledged: nothing to acknowledge)."""

    subject: str
    data: bytes
    headers: dict[str, str]


class Tap:
    """A live core subscription; `stop()` ends it (closing the bus ends it too)."""

    def __init__(self, sub: Any) -> None:
        self._sub = sub

    async def stop(self) -> None:
        with contextlib.suppress(Exception):
            await self._sub.unsubscribe()


class StreamOps:
    """Helpers on top of `nc` and `js`, which the Bus provides."""

    @property
    def nc(self) -> Client:
        raise NotImplementedError  # pragma: no cover - Bus implements it

    @property
    def js(self) -> JetStreamContext:
        raise NotImplementedError  # pragma: no cover - Bus implements it

    async def stream_state(self, stream: str) -> StreamState | None:
        """What `stream` holds, or None when it does not exist."""
        try:
            info = await self.js.stream_info(stream)
        except NotFoundError:
            return None
        st = info.state
        return StreamState(messages=st.messages, bytes=st.bytes, first_seq=st.first_seq,
                           last_seq=st.last_seq)

    async def stored(self, stream: str, seq: int, *, subject: str | None = None,
                     next: bool = False) -> Stored | None:  # noqa: A002 - the API's own word
        """The message at `seq` (with `next`, the first at or after it matching `subject`);
        None when there is none."""
        try:
            raw = await self.js.get_msg(stream, seq=seq, subject=subject, next=next)
        except NotFoundError:
            return None
        return Stored(stream, int(raw.seq or seq), raw.subject or "", raw.data or b"",
                      dict(raw.headers or {}))

    async def subscribe(self, subject: str,
                        cb: Callable[[Delivery], Awaitable[None]]) -> Tap:
        """A core subscription (live messages only, at most once): for taps and answers."""

        async def deliver(msg: Any) -> None:
            await cb(Delivery(msg.subject, msg.data or b"", dict(msg.headers or {})))

        sub = await self.nc.subscribe(subject, cb=deliver)
        # A round trip: once this returns, the server has the subscription, so a caller that
        # then publishes (or says "tapping") sees everything from that point on.
        with contextlib.suppress(Exception):
            await self.nc.flush(timeout=10)
        return Tap(sub)

    async def delete_stream(self, name: str) -> bool:
        """Delete a stream; False when it did not exist."""
        try:
            return bool(await self.js.delete_stream(name))
        except NotFoundError:
            return False

    async def delete_bucket(self, name: str) -> bool:
        """Delete a KV bucket; False when it did not exist."""
        try:
            return bool(await self.js.delete_key_value(name))
        except NotFoundError:
            return False
