"""Durable pull consumers: decode at the edge, map handler outcomes to ack / nak / term + DLQ."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
from nats.aio.msg import Msg as NatsMsg
from nats.js import api
from nats.js.errors import NotFoundError

from bus import logs, lost, tracing
from bus._fair import Slots, key_of
from bus.codec import decoder_for
from bus.connection import Bus, StoreFull, provision_failed
from contracts import DeadLetter, Msg, short_hash

log = logging.getLogger(__name__)


class Retry(Exception):
    """Handler outcome: not now, deliver again after `delay` seconds."""

    def __init__(self, reason: str, delay: float = 1.0) -> None:
        super().__init__(reason)
        self.delay = delay


class Reject(Exception):
    """Handler outcome: this message can never be handled; dead-letter it with the reason."""


@dataclass(frozen=True)
class Subscription:
    """A durable pull consumer an actor reads from, declared next to the actor."""

    stream: str
    durable: str
    filters: tuple[str, ...]
    ack_wait: float = 10.0  # in_progress every ack_wait/3 keeps long work; a crash frees it fast
    max_deliver: int = 5  # attempts; one extra delivery catches crash loops
    max_ack_pending: int = 256
    concurrency: int = 16  # handlers running at once (messages queued behind their key wait apart)
    ordered_by: str = "session"  # attribute (dotted path) keying in-order handling; "" for none
    first_by: str = "is_owner"  # messages with this attribute true take free slots first
    dedupe: bool = True  # skip messages already handled (done marker in KV)


Handler = Callable[[Any], Awaitable[None]]
STORE_FULL_DELAY = 15.0  # the supervisor re-checks free space every 10 s

_delivery: contextvars.ContextVar[int] = contextvars.ContextVar("delivery", default=1)


def delivery() -> int:
    """How many times the message being handled was delivered (1 the first time).

    JetStream keeps the count, so a handler that retries with `Retry` knows its attempt
    across restarts of its process.
    """
    return _delivery.get()


def consumer_config(sub: Subscription) -> api.ConsumerConfig:
    """The durable pull consumer a Subscription reads from, as JetStream stores it."""
    cfg = api.ConsumerConfig(
        durable_name=sub.durable,
        name=sub.durable,
        ack_policy=api.AckPolicy.EXPLICIT,
        ack_wait=sub.ack_wait,
        max_deliver=sub.max_deliver + 1,
        max_ack_pending=sub.max_ack_pending,
        deliver_policy=api.DeliverPolicy.ALL,
    )
    if len(sub.filters) == 1:
        cfg.filter_subject = sub.filters[0]
    else:
        cfg.filter_subjects = list(sub.filters)
    return cfg


def _filters(cfg: api.ConsumerConfig) -> list[str]:
    return sorted(cfg.filter_subjects or ([cfg.filter_subject] if cfg.filter_subject else []))


def _same_consumer(have: api.ConsumerConfig, want: api.ConsumerConfig) -> bool:
    return (
        _filters(have) == _filters(want)
        and abs((have.ack_wait or 0.0) - (want.ack_wait or 0.0)) < 1e-3
        and have.max_deliver == want.max_deliver
        and have.max_ack_pending == want.max_ack_pending
        and have.ack_policy == want.ack_policy
    )


async def ensure_consumer(bus: Bus, sub: Subscription, start_after: int = 0) -> None:
    """Create or update the durable only when it is missing or different.

    Looking first means a process that may not create consumers (an actor with its own NATS
    user: the supervisor provisions every durable) binds to what exists. `start_after`: a new
    durable starts after that stream sequence (a restore: restored history is not work).
    """
    want = consumer_config(sub)
    if start_after:
        want.deliver_policy = api.DeliverPolicy.BY_START_SEQUENCE
        want.opt_start_seq = start_after + 1
    try:
        have: api.ConsumerConfig | None = (
            await bus.js.consumer_info(sub.stream, sub.durable)).config
    except NotFoundError:
        have = None
    except Exception as exc:  # noqa: BLE001 - refused: say what to do
        raise provision_failed(f"look up the consumer {sub.durable} on {sub.stream}", exc) from exc
    if have is not None and _same_consumer(have, want):
        return
    try:
        await bus.js.add_consumer(sub.stream, config=want)
    except Exception as exc:  # noqa: BLE001 - refused: say what to do
        what = "create" if have is None else "update"
        raise provision_failed(f"{what} the consumer {sub.durable} on {sub.stream}", exc) from exc


def semconv(subject: str, durable: str, msg_id: str, actor: str,
            delivery: int) -> dict[str, str | int]:
    """Messaging semantic-convention attributes of a handled message's span."""
    return {"messaging.system": "nats", "messaging.operation.type": "process",
            "messaging.destination.name": subject, "messaging.consumer.group.name": durable,
            "messaging.message.id": msg_id, "wintermute.actor": actor,
            "wintermute.delivery": delivery}


@dataclass
class ConsumerStats:
    handled: int = 0
    failed: int = 0
    dead_lettered: int = 0
    last_fetch_ok: float = field(default_factory=time.time)


class Consumer:
    """Runs one Subscription: fetch, decode, order per key, handle, settle."""

    def __init__(
        self, bus: Bus, actor: str, sub: Subscription, inbox: Any, handler: Handler
    ) -> None:
        self.bus = bus
        self.actor = actor
        self.sub = sub
        self.decoder = decoder_for(inbox)
        self.handler = handler
        self.stats = ConsumerStats()
        self._locks: dict[str, list[Any]] = {}  # key -> [lock, holders + waiters]
        self._inflight = 0  # fetched and not yet settled
        self._queued = 0  # of those, waiting behind an earlier message with the same key
        self._slots = Slots(sub.concurrency)
        self._psub: Any = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()

    async def _subscribe(self) -> Any:
        await ensure_consumer(self.bus, self.sub)
        return await self.bus.js.pull_subscribe_bind(
            durable=self.sub.durable, stream=self.sub.stream
        )

    async def run(self) -> None:
        """Fetch until stopped; re-creates the subscription after server restarts."""
        try:
            await self._fetch_loop()
        finally:
            # An unsubscribed pull subscription lets the connection drain promptly.
            if self._psub is not None:
                with contextlib.suppress(Exception):
                    await self._psub.unsubscribe()

    def _room(self) -> int:
        """How many more messages to fetch now.

        Messages queued behind their key (one session's burst) take no room, so they cannot
        starve other keys; up to `concurrency` more than can run are fetched, so a waiting
        owner message can take the next free slot ahead of others. JetStream's
        max_ack_pending bounds the total.
        """
        busy = self._inflight - self._queued
        return min(2 * self.sub.concurrency - busy, self.sub.max_ack_pending - self._inflight)

    async def _fetch_loop(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            # Saturated with in-flight work: wait (still alive) instead of fetching more.
            while self._room() <= 0:
                self.stats.last_fetch_ok = time.time()
                await asyncio.sleep(0.05)
            try:
                if self._psub is None:
                    self._psub = await self._subscribe()
                msgs = await self._fetch(self._psub, self._room())
                self.stats.last_fetch_ok = time.time()
                failures = 0
            except asyncio.CancelledError:
                raise
            except TimeoutError:
                self.stats.last_fetch_ok = time.time()
                continue
            except Exception as exc:  # noqa: BLE001 - server restart, consumer gone: resubscribe
                failures += 1
                log.warning("fetch on %s failed (%s); resubscribing", self.sub.durable, exc)
                if self._psub is not None:
                    with contextlib.suppress(Exception):
                        await self._psub.unsubscribe()
                self._psub = None
                await asyncio.sleep(min(0.25 * failures, 2.0))
                continue
            await self._dispatch(msgs)

    async def _dispatch(self, msgs: list[NatsMsg]) -> None:
        """Start a handler task per fetched message (bus/batch.py handles a batch in one)."""
        for raw in msgs:
            self._inflight += 1
            task = asyncio.create_task(self._process(raw))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _fetch(psub: Any, batch: int) -> list[NatsMsg]:
        """Wait for one message, then take whatever else is already pending.

        nats.py's lingering fetch(batch=N) returns only when N messages arrived or the timeout
        passed, which would add up to a second of latency to every hop.
        """
        msgs: list[NatsMsg] = await psub.fetch(batch=1, timeout=1.0)
        pending = msgs[-1].metadata.num_pending if msgs else 0
        if pending and batch > 1:
            with contextlib.suppress(TimeoutError):
                msgs += await psub.fetch(batch=min(pending, batch - 1), timeout=0.5)
        return msgs

    async def stop(self, grace: float) -> None:
        """Stop fetching; give in-flight handlers `grace` seconds, then hand them back."""
        self._stopping.set()
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)

    async def _process(self, raw: NatsMsg) -> None:
        try:
            await self._process_one(raw)
        finally:
            self._inflight -= 1

    async def _process_one(self, raw: NatsMsg) -> None:
        meta = raw.metadata
        deliveries = meta.num_delivered
        headers = raw.headers or {}
        token = logs.bind(
            actor=self.actor, subject=raw.subject, seq=meta.sequence.stream,
            msg_id=headers.get("Nats-Msg-Id"), delivery=deliveries,
        )
        try:
            with tracing.handling(
                f"{self.actor} {raw.subject}", headers, subject=raw.subject,
                seq=meta.sequence.stream, msg_id=headers.get("Nats-Msg-Id", ""),
                **semconv(raw.subject, self.sub.durable, headers.get("Nats-Msg-Id", ""),
                          self.actor, deliveries),
            ):
                await self._decode_and_handle(raw, deliveries)
        finally:
            logs.reset(token)

    async def _admit(self, raw: NatsMsg, deliveries: int) -> Msg | None:
        """The message decoded, or None once it is dead-lettered: not a valid payload, or
        delivered more often than max_deliver (the actor failed or crashed on it)."""
        try:
            msg: Msg = self.decoder.decode(raw.data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            await self._dead_letter(raw, f"invalid payload: {exc}")
            return None
        if deliveries > self.sub.max_deliver:
            await self._dead_letter(
                raw, f"the {self.actor} actor failed or crashed on this message "
                f"{self.sub.max_deliver} times"
            )
            return None
        return msg

    async def _decode_and_handle(self, raw: NatsMsg, deliveries: int) -> None:
        msg = await self._admit(raw, deliveries)
        if msg is None:
            return
        tracing.annotate({f"wintermute.{k}": v for k in ("session", "turn_id")
                            if isinstance(v := getattr(msg, k, None), str) and v})
        key = key_of(msg, self.sub.ordered_by)
        first = bool(self.sub.first_by and getattr(msg, self.sub.first_by, False))
        # in_progress from the moment of fetch: waiting behind the session lock counts too
        beat = asyncio.create_task(self._keep_alive(raw))
        try:
            async with self._ordered(key):
                await self._slots.acquire(first)
                try:
                    await self._handle(raw, msg, deliveries)
                finally:
                    self._slots.release()
        finally:
            beat.cancel()

    @contextlib.asynccontextmanager
    async def _ordered(self, key: str) -> AsyncIterator[None]:
        """FIFO per key; the lock is dropped once nobody holds or waits for it."""
        if not key:
            yield
            return
        entry = self._locks.get(key)
        if entry is None:
            entry = self._locks[key] = [asyncio.Lock(), 0]
        entry[1] += 1
        queued = entry[0].locked()
        self._queued += queued
        try:
            await entry[0].acquire()
        except BaseException:
            entry[1] -= 1
            if entry[1] == 0:
                del self._locks[key]
            raise
        finally:
            self._queued -= queued
        try:
            yield
        finally:
            entry[0].release()
            entry[1] -= 1
            if entry[1] == 0:
                del self._locks[key]

    def _done_key(self, msg: Msg) -> str:
        return f"{self.sub.durable}.{short_hash(msg.id, 24)}"

    async def _handle(self, raw: NatsMsg, msg: Msg, deliveries: int) -> None:
        session_token = logs.bind(session=getattr(msg, "session", None), type=type(msg).__name__)
        _delivery.set(deliveries)  # this task's own context: concurrent handlers do not mix
        try:
            if self.sub.dedupe and await self._already_done(msg):
                log.info("already handled; acking the redelivery")
                await raw.ack()
                return
            await self.handler(msg)
            if self.sub.dedupe:
                # Marker and ack leave in one socket write, in this order. Not waiting for
                # the marker's confirmation loses nothing: it matters only if the message is
                # delivered again, i.e. if the ack (written after it) is lost too.
                await self.bus.kv_put_unconfirmed(
                    self.bus.subjects.kv_done, self._done_key(msg), b"1")
            await raw.ack()
            self.stats.handled += 1
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await raw.nak()  # hand it back so a live replica (or our restart) takes it
            raise
        except Exception as exc:  # noqa: BLE001 - a failing handler must not kill the actor
            await self._failed(raw, exc, deliveries)
        finally:
            logs.reset(session_token)

    async def _failed(self, raw: NatsMsg, exc: Exception, deliveries: int) -> None:
        """Settle a message whose handler raised: dead-letter it (Reject, or failing too
        often), or hand it back for later (Retry, a full store, any other failure)."""
        if isinstance(exc, Reject):
            await self._dead_letter(raw, str(exc))
        elif isinstance(exc, Retry):
            log.info("retry requested: %s", exc)
            await raw.nak(delay=exc.delay)
        elif isinstance(exc, StoreFull):  # not this message's fault: wait for the space
            log.warning("%s; trying again in %.0f s", exc, STORE_FULL_DELAY)
            await raw.nak(delay=STORE_FULL_DELAY)
        else:
            self.stats.failed += 1
            log.error("handler failed", exc_info=exc)
            if deliveries >= self.sub.max_deliver:
                await self._dead_letter(raw, f"handler failed {deliveries} times: {exc!r}")
            else:
                await raw.nak(delay=min(0.5 * 2**deliveries, 15.0))

    async def _already_done(self, msg: Msg) -> bool:
        return await self.bus.kv_get(self.bus.subjects.kv_done, self._done_key(msg)) is not None

    async def _keep_alive(self, raw: NatsMsg) -> None:
        """Long handlers send in_progress so the server does not redeliver mid-work."""
        while True:
            await asyncio.sleep(max(self.sub.ack_wait / 3, 0.5))
            with contextlib.suppress(Exception):
                await raw.in_progress()

    async def _dead_letter(self, raw: NatsMsg, reason: str) -> None:
        tracing.failed(f"dead-lettered: {reason}")
        meta = raw.metadata
        letter = DeadLetter(
            id=f"dlq:{meta.stream}:{meta.sequence.stream}:{self.sub.durable}",
            actor=self.actor,
            reason=reason[:2000],
            subject=raw.subject,
            stream=meta.stream,
            stream_seq=meta.sequence.stream,
            deliveries=meta.num_delivered,
            payload=raw.data[:65536].decode("utf-8", "replace"),
            headers={k: v for k, v in (raw.headers or {}).items()},
        )
        log.warning("dead-lettering: %s", reason)
        try:
            await self.bus.send(letter)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the store is full or away: keep it locally
            if not lost.keep("deadletter", f"could not be dead-lettered: {exc}",
                             msgspec.to_builtins(letter)):
                raise  # nowhere to keep it: leave the message to be delivered again
        await raw.term()
        self.stats.dead_lettered += 1
