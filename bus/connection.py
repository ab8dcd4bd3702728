"""The connection to NATS: reconnecting client, provisioning, publish with dedupe ids, KV."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Iterable
from typing import Any

import msgspec
from nats.aio.client import Client
from nats.js import JetStreamContext, api
from nats.js.errors import BadRequestError, KeyNotFoundError, NotFoundError
from nats.js.kv import KeyValue

from bus import tracing
from bus._connect import AdaptiveTimeout, HandshakeResets, describe, first_of, is_refusal
from bus.codec import encode
from bus.kv import KvOps
from bus.streams import StreamOps
from bus.subjects import BucketSpec, StreamSpec, Subjects
from contracts import Msg, TurnRequest

log = logging.getLogger(__name__)

MAX_PAYLOAD = 1 << 20


class PublishError(Exception):
    """JetStream did not confirm a publish."""


class PayloadTooLarge(PublishError):
    """The message is over the server's payload limit: no retry can store it."""


class StoreFull(PublishError):
    """JetStream refused the message for lack of storage ("insufficient resources")."""


STORE_FULL = (
    "my message store is full (the disk is out of space), so nothing new can be stored until "
    "space is freed"
)


def _store_full(exc: BaseException) -> bool:
    return getattr(exc, "err_code", None) == 10047 or "insufficient resources" in str(exc).lower()


class ProvisionError(Exception):
    """A stream, bucket or consumer is missing (or different) and could not be made right."""


def provision_failed(what: str, exc: BaseException) -> ProvisionError:
    """The sentence for a stream, bucket or consumer this process could not look up or make."""
    detail = ("no answer (this NATS user may not do that)" if isinstance(exc, TimeoutError)
              else str(exc) or type(exc).__name__)
    return ProvisionError(
        f"Could not {what}: {detail}. With per-actor NATS credentials only the supervisor "
        "creates streams, buckets and consumers: start everything with `wintermute up` (or "
        "`wintermute up --no-spawn` next to the actors), or connect as a user allowed to."
    )


class Bus(KvOps, StreamOps):
    """One NATS connection for a process, with the JetStream helpers every actor uses.

    `async with Bus(url, prefix) as bus:` connects (unless already connected) and closes.
    """

    def __init__(self, url: str, prefix: str = "wm", name: str = "wintermute") -> None:
        self.url = url
        self.subjects = Subjects(prefix)
        self.name = name
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        self._kv: dict[str, KeyValue] = {}
        self._closed = False
        self.denied: deque[str] = deque(maxlen=50)  # permission violations, newest last

    async def __aenter__(self) -> Bus:
        if self._nc is None:
            await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def nc(self) -> Client:
        if self._nc is None:
            raise RuntimeError("bus is not connected")
        return self._nc

    @property
    def js(self) -> JetStreamContext:
        if self._js is None:
            raise RuntimeError("bus is not connected")
        return self._js

    async def connect(
        self, timeout: float = 10.0, credentials: str = "", user: str = "", password: str = "",
        seed: str = "", inbox: str = "", api_prefix: str = "",
    ) -> Bus:
        """Connect, waiting up to `timeout` for the first connection; reconnect forever after.

        `credentials` is a .creds file, `seed` an nkey seed file, `user`/`password` a NATS
        user. Replies arrive under `inbox` (default: the user's own `_INBOX_<user>`, as its
        permissions expect); JetStream is reached under `api_prefix` (default `$JS.API`; an
        actor's own account imports it elsewhere, bus/accounts.py). Each handshake attempt
        waits longer than the last one that timed out (bus/_connect.py), so a busy server is
        waited for rather than asked again every 2 s.
        """
        from bus._natsimport import websocket_support
        from bus.permissions import inbox_prefix

        websocket_support(self.url)
        pace = AdaptiveTimeout()
        nc = Client()
        first_error: list[BaseException] = []  # the latest error before the first connection
        refused = asyncio.Event()  # the server said no to these credentials: no use waiting
        resets = HandshakeResets(bool(credentials or seed or user))

        async def on_error(exc: Exception) -> None:
            pace.failed(exc)
            nc.options["connect_timeout"] = pace.current
            if not nc.is_connected and self._nc is None:
                if not refused.is_set():  # the refusal stays the cause (a reset follows it)
                    first_error[:] = [exc]  # said once, at the end, if it never works
                if is_refusal(exc) or resets.count(exc):
                    refused.set()
                return
            if "permissions violation" in str(exc).lower():
                log.error("nats refused this as %s: %s (see bus/permissions.py)",
                          user or "this user", exc)
                self.denied.append(str(exc))
                return
            log.warning("nats error: %s", describe(exc, pace.current))

        async def on_reconnect() -> None:
            pace.connected()
            nc.options["connect_timeout"] = pace.current
            log.info("reconnected to nats at %s", self.url)

        kwargs: dict[str, Any] = {}
        if credentials:
            kwargs["user_credentials"] = credentials
        if seed:
            kwargs["nkeys_seed"] = seed
        elif user:
            kwargs.update(user=user, password=password)
        if inbox or user:
            kwargs["inbox_prefix"] = inbox or inbox_prefix(user)
        started = asyncio.get_running_loop().time()
        try:
            # nats.py retries a first connection forever itself (max_reconnect_attempts=-1),
            # a refused password included: bound it here.
            # A refusal of the credentials ends the wait at once: a busy machine's slow
            # handshake is waited for, a wrong key is not retried until `timeout`.
            await first_of(nc.connect(
                self.url, name=self.name, max_reconnect_attempts=-1,
                # nats.py annotates these as int; it only sleeps and waits on them
                reconnect_time_wait=0.5, connect_timeout=pace.current,  # type: ignore[arg-type]
                error_cb=on_error, reconnected_cb=on_reconnect,
                **kwargs,
            ), refused, timeout)
        except Exception as exc:  # noqa: BLE001 - any failure to connect is reported
            with contextlib.suppress(Exception):
                await asyncio.wait_for(nc.close(), 2)
            cause = resets.cause(first_error[0] if first_error else exc)
            waited = asyncio.get_running_loop().time() - started
            raise ConnectionError(
                f"cannot reach NATS at {self.url}: {describe(cause, waited)}") from exc
        pace.connected()
        nc.options["connect_timeout"] = pace.current
        self._nc = nc
        self._js = nc.jetstream(timeout=10, **({"prefix": api_prefix} if api_prefix else {}))
        return self

    async def provision(
        self, streams: Iterable[StreamSpec] | None = None,
        buckets: Iterable[BucketSpec] | None = None,
    ) -> None:
        """Make sure streams and KV buckets exist as specified (all of them by default).

        Each is looked up first and created or updated only when missing or different, so a
        process whose NATS user may only look (an actor with its own credentials) verifies.
        """
        for spec in self.subjects.streams() if streams is None else streams:
            await self._ensure_stream(spec)
        for bucket in self.subjects.buckets() if buckets is None else buckets:
            await self._ensure_bucket(bucket)

    async def _ensure_stream(self, spec: StreamSpec) -> None:
        cfg = api.StreamConfig(
            name=spec.name,
            subjects=list(spec.subjects),
            retention=api.RetentionPolicy.LIMITS,
            storage=api.StorageType.FILE,
            max_age=spec.max_age,
            max_bytes=spec.max_bytes,
            max_msg_size=MAX_PAYLOAD,
            duplicate_window=spec.duplicate_window,
            description=spec.description,
        )
        have = await self._stream_config(spec.name)
        if have is None:
            try:
                await self.js.add_stream(cfg)
                return
            except BadRequestError:  # another process created it first
                have = await self._stream_config(spec.name)
            except Exception as exc:  # noqa: BLE001 - refused: say what to do
                raise provision_failed(f"create the stream {spec.name}", exc) from exc
        if have is None or not _same_stream(have, cfg):
            try:
                await self.js.update_stream(cfg)
            except Exception as exc:  # noqa: BLE001 - refused: say what to do
                raise provision_failed(f"update the stream {spec.name}", exc) from exc

    async def _stream_config(self, name: str) -> api.StreamConfig | None:
        """A stream's configuration, or None when it does not exist."""
        try:
            return (await self.js.stream_info(name)).config
        except NotFoundError:
            return None
        except Exception as exc:  # noqa: BLE001 - refused: say what to do
            raise provision_failed(f"look up the stream {name}", exc) from exc

    async def _ensure_bucket(self, spec: BucketSpec) -> None:
        if await self._stream_config(f"KV_{spec.name}") is None:
            try:
                await self.js.create_key_value(
                    bucket=spec.name, ttl=spec.ttl, history=spec.history,
                    description=spec.description,
                )
            except BadRequestError:  # another process created it first
                pass
            except Exception as exc:  # noqa: BLE001 - refused: say what to do
                raise provision_failed(f"create the KV bucket {spec.name}", exc) from exc
        self._kv[spec.name] = await self.js.key_value(spec.name)

    async def kv(self, bucket: str) -> KeyValue:
        """A KV bucket handle (provisioned buckets are cached)."""
        handle = self._kv.get(bucket)
        if handle is None:
            handle = await self.js.key_value(bucket)
            self._kv[bucket] = handle
        return handle

    async def kv_get(self, bucket: str, key: str) -> bytes | None:
        """The value under `key`, or None when absent or deleted."""
        try:
            entry = await (await self.kv(bucket)).get(key)
        except KeyNotFoundError:
            return None
        return entry.value or None

    async def kv_keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Keys of a bucket (those starting with `prefix`), sorted.

        Read from the bucket stream's subject counts (`$JS.API.STREAM.INFO`), which needs no
        consumer. A key whose latest entry is a delete is still listed until it ages out;
        kv_get returns None for it.
        """
        stream, pre = f"KV_{bucket}", f"$KV.{bucket}."
        info = await self.js.stream_info(stream, subjects_filter=f"{pre}>")
        keys = (subj[len(pre):] for subj in (info.state.subjects or {}))
        return sorted(k for k in keys if k.startswith(prefix))

    async def kv_put(self, bucket: str, key: str, value: object) -> int:
        """Store raw bytes, or a record (a Struct or plain JSON value) as JSON."""
        if isinstance(value, bytes):
            data = value
        elif isinstance(value, msgspec.Struct):
            data = encode(value)
        else:
            data = msgspec.json.encode(value)
        return int(await (await self.kv(bucket)).put(key, data))

    async def kv_put_unconfirmed(self, bucket: str, key: str, data: bytes) -> None:
        """Store bytes without waiting for JetStream's confirmation (a core publish on the key's
        subject): for a marker whose loss only costs a repeated check, written in the same
        socket write as what follows it on this connection (the consumer's ack)."""
        kv = await self.kv(bucket)
        await self.nc.publish(f"{kv._pre}{key}", data)

    async def send(self, msg: Msg, *, headers: dict[str, str] | None = None) -> bool:
        """Publish a contract on the subject its route derives from it (contracts/routes.py).

        Returns False when JetStream reports the message as a duplicate.
        """
        return await self.publish(self.subjects.of(msg), msg, headers=headers)

    async def publish(self, subject: str, msg: Msg, *, headers: dict[str, str] | None = None) -> bool:
        """Publish a contract to JetStream on an explicit subject; prefer `send`, which derives
        the subject from the route table. The message id makes re-publishes no-ops.

        Returns False when JetStream reports the message as a duplicate.
        """
        if isinstance(msg, TurnRequest) and msg.origin == "user":
            # A user's turn enters here (the channel): its root span starts the turn's trace.
            with tracing.turn_root(f"turn {msg.reply_to.channel}", **{
                    "wintermute.session": msg.session, "wintermute.turn_id": msg.id,
                    "messaging.destination.name": subject}):
                traceparent = tracing.current()
        else:
            traceparent = tracing.outgoing()
        hdrs = {"Nats-Msg-Id": msg.id, "traceparent": traceparent}
        if headers:
            hdrs.update(headers)
        data = encode(msg)
        if len(data) > MAX_PAYLOAD:
            raise PayloadTooLarge(
                f"payload of {len(data)} bytes is over the 1 MiB limit ({subject})")
        last: Exception | None = None
        for attempt in range(6):
            try:
                ack = await self.js.publish(subject, data, headers=hdrs, timeout=5)
                return not ack.duplicate
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - retried: server restarting, no responders
                if _store_full(exc):  # not a passing fault: say so at once
                    raise StoreFull(f"JetStream did not accept {subject}: {STORE_FULL}") from exc
                last = exc
                await asyncio.sleep(min(0.2 * 2**attempt, 3.0))
        raise PublishError(f"JetStream did not accept {subject}: {last}")

    async def send_unstored(self, msg: Msg) -> None:
        """Publish a contract on its routed subject without JetStream (core NATS): only live
        subscribers get it. For a notice that must get through while the store is full."""
        await self.nc.publish(self.subjects.of(msg), encode(msg))

    async def publish_raw(self, subject: str, data: bytes, *,
                          headers: dict[str, str] | None = None) -> int:
        """Store bytes as they are (a restore of exported history); the stream sequence."""
        ack = await self.js.publish(subject, data, headers=headers or None, timeout=10)
        return int(ack.seq)

    async def consumer_backlog(self, stream: str, durable: str) -> tuple[int, int]:
        """(messages not yet delivered, delivered but not yet acked) of a durable consumer."""
        info = await self.js.consumer_info(stream, durable)
        return int(info.num_pending or 0), int(info.num_ack_pending or 0)

    @property
    def connected(self) -> bool:
        """Whether the connection is up right now (False while it reconnects)."""
        return self._nc is not None and self._nc.is_connected

    async def close(self) -> None:
        """Drain and close; safe to call twice, and quick when the server is already gone."""
        if self._closed or self._nc is None:
            return
        self._closed = True
        nc = self._nc
        if nc.is_connected:
            try:
                await asyncio.wait_for(nc.drain(), timeout=5)
                return
            except Exception:  # noqa: BLE001 - closing anyway
                pass
        with contextlib.suppress(Exception):
            await asyncio.wait_for(nc.close(), timeout=2)


def _same_stream(have: api.StreamConfig, want: api.StreamConfig) -> bool:
    """Whether a stream already has the settings we provision (server defaults aside)."""
    def close(a: float | None, b: float | None) -> bool:
        return abs((a or 0.0) - (b or 0.0)) < 1e-3

    return (
        sorted(have.subjects or []) == sorted(want.subjects or [])
        and close(have.max_age, want.max_age)
        and close(have.duplicate_window, want.duplicate_window)
        and (have.max_bytes or -1) == (want.max_bytes or -1)
        and (have.max_msg_size or -1) == (want.max_msg_size or -1)
        and have.retention == want.retention
        and have.storage == want.storage
        and (have.description or "") == (want.description or "")
    )
