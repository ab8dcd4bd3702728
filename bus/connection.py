"""The connection to NATS: reconnecting client, provisioning, publish with dedupe ids, KV."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import msgspec
import nats
from nats.aio.client import Client
from nats.js import JetStreamContext, api
from nats.js.errors import BadRequestError, KeyNotFoundError, NotFoundError
from nats.js.kv import KeyValue

from bus import tracing
from bus.codec import encode
from bus.subjects import BucketSpec, StreamSpec, Subjects
from contracts import Msg

log = logging.getLogger(__name__)

MAX_PAYLOAD = 1 << 20


class PublishError(Exception):
    """JetStream did not confirm a publish."""


class Bus:
    """One NATS connection for a process, with the JetStream helpers every actor uses."""

    def __init__(self, url: str, prefix: str = "wm", name: str = "wintermute") -> None:
        self.url = url
        self.subjects = Subjects(prefix)
        self.name = name
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        self._kv: dict[str, KeyValue] = {}
        self._closed = False

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

    async def connect(self, timeout: float = 10.0, credentials: str = "") -> Bus:
        """Connect, retrying until `timeout`; reconnects forever once connected."""

        async def on_error(exc: Exception) -> None:
            log.warning("nats error: %s", exc)

        async def on_reconnect() -> None:
            log.info("reconnected to nats at %s", self.url)

        kwargs: dict[str, Any] = {}
        if credentials:
            kwargs["user_credentials"] = credentials
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            try:
                self._nc = await nats.connect(
                    self.url,
                    name=self.name,
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=0.5,
                    connect_timeout=2,
                    error_cb=on_error,
                    reconnected_cb=on_reconnect,
                    **kwargs,
                )
                break
            except Exception as exc:  # noqa: BLE001 - any failure to connect is retried
                if asyncio.get_running_loop().time() > deadline:
                    raise ConnectionError(f"cannot reach NATS at {self.url}: {exc}") from exc
                await asyncio.sleep(0.2)
        self._js = self._nc.jetstream(timeout=10)
        return self

    async def provision(self) -> None:
        """Create or update every stream and KV bucket; safe to run from every process."""
        for spec in self.subjects.streams():
            await self._ensure_stream(spec)
        for bucket in self.subjects.buckets():
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
        try:
            await self.js.add_stream(cfg)
        except BadRequestError:
            await self.js.update_stream(cfg)

    async def _ensure_bucket(self, spec: BucketSpec) -> None:
        try:
            self._kv[spec.name] = await self.js.key_value(spec.name)
            return
        except (NotFoundError, BadRequestError):
            pass
        try:
            self._kv[spec.name] = await self.js.create_key_value(
                bucket=spec.name, ttl=spec.ttl, history=spec.history, description=spec.description
            )
        except BadRequestError:  # another process created it first
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

    async def kv_put(self, bucket: str, key: str, value: bytes | msgspec.Struct) -> int:
        data = value if isinstance(value, bytes) else encode(value)
        return int(await (await self.kv(bucket)).put(key, data))

    async def publish(self, subject: str, msg: Msg, *, headers: dict[str, str] | None = None) -> bool:
        """Publish a contract to JetStream; the message id makes re-publishes no-ops.

        Returns False when JetStream reports the message as a duplicate.
        """
        hdrs = {"Nats-Msg-Id": msg.id, "traceparent": tracing.outgoing()}
        if headers:
            hdrs.update(headers)
        data = encode(msg)
        if len(data) > MAX_PAYLOAD:
            raise PublishError(f"payload of {len(data)} bytes is over the 1 MiB limit ({subject})")
        last: Exception | None = None
        for attempt in range(6):
            try:
                ack = await self.js.publish(subject, data, headers=hdrs, timeout=5)
                return not ack.duplicate
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - retried: server restarting, no responders
                last = exc
                await asyncio.sleep(min(0.2 * 2**attempt, 3.0))
        raise PublishError(f"JetStream did not accept {subject}: {last}")

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
