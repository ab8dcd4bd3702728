"""Typed KV operations of the Bus: decode into records, compare-and-set updates, delete.

A value that does not decode into its record (written by an older version, or by hand) is
treated as absent with a log line: a reader never crashes on old state, and the next write
replaces it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from bus.codec import encode

log = logging.getLogger(__name__)

T = TypeVar("T")

CAS_TRIES = 20


class Conflict(Exception):
    """A compare-and-set update lost to concurrent writers every time it was tried."""


_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}


def _decoder(kind: Any) -> msgspec.json.Decoder[Any]:
    """A decoder per record type, built once."""
    dec = _decoders.get(kind)
    if dec is None:
        dec = _decoders[kind] = msgspec.json.Decoder(kind)
    return dec


def decode_record(raw: bytes | None, kind: type[T], where: str = "") -> T | None:
    """`raw` as a `kind`, or None when absent or unreadable (logged, never raised)."""
    if not raw:
        return None
    try:
        value: T = _decoder(kind).decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        log.warning("ignoring an unreadable %s in %s: %s", getattr(kind, "__name__", kind),
                    where or "KV", exc)
        return None
    return value


def _encode(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, msgspec.Struct):
        return encode(value)
    return msgspec.json.encode(value)


class KvOps:
    """KV helpers on top of `kv()` and `kv_get()`, which the Bus provides."""

    async def kv(self, bucket: str) -> KeyValue:
        raise NotImplementedError  # pragma: no cover - Bus implements it

    async def kv_get(self, bucket: str, key: str) -> bytes | None:
        raise NotImplementedError  # pragma: no cover - Bus implements it

    async def kv_get_as(self, bucket: str, key: str, kind: type[T]) -> T | None:
        """The value under `key` decoded as `kind`; None when absent or unreadable."""
        return decode_record(await self.kv_get(bucket, key), kind, f"{bucket}/{key}")

    async def kv_delete(self, bucket: str, key: str) -> None:
        """Delete `key` (a no-op when it is absent)."""
        try:
            await (await self.kv(bucket)).delete(key)
        except KeyNotFoundError:
            pass

    async def kv_create(self, bucket: str, key: str, value: object) -> bool:
        """Store `value` only if `key` holds nothing; False when it already does."""
        try:
            await (await self.kv(bucket)).create(key, _encode(value))
        except KeyWrongLastSequenceError:
            return False
        return True

    async def kv_get_rev(self, bucket: str, key: str, kind: type[T]) -> tuple[T | None, int]:
        """The value as `kind` and its revision (0 when absent), for `kv_swap`."""
        try:
            entry = await (await self.kv(bucket)).get(key)
        except KeyNotFoundError:
            return None, 0
        return decode_record(entry.value, kind, f"{bucket}/{key}"), int(entry.revision or 0)

    async def kv_get_raw_rev(self, bucket: str, key: str) -> tuple[bytes | None, int]:
        """The raw value (None when absent or deleted) and its revision (0 when absent)."""
        try:
            entry = await (await self.kv(bucket)).get(key)
        except KeyNotFoundError:
            return None, 0
        return entry.value or None, int(entry.revision or 0)

    async def kv_put_at(self, bucket: str, key: str, data: bytes, revision: int) -> int | None:
        """Store `data` only if `key` is still at `revision` (0: absent); the new revision, or
        None when someone else wrote it in between."""
        kv = await self.kv(bucket)
        try:
            if revision:
                return int(await kv.update(key, data, last=revision))
            return int(await kv.create(key, data))
        except KeyWrongLastSequenceError:
            return None

    async def kv_swap(self, bucket: str, key: str, value: object, revision: int) -> bool:
        """Store `value` only if `key` is still at `revision` (0: absent); False otherwise."""
        kv = await self.kv(bucket)
        try:
            if revision:
                await kv.update(key, _encode(value), last=revision)
            else:
                await kv.create(key, _encode(value))
        except KeyWrongLastSequenceError:
            return False
        return True

    async def kv_update(
        self, bucket: str, key: str, fn: Callable[[T | None], T | None], *, kind: type[T],
        tries: int = CAS_TRIES,
    ) -> T | None:
        """Read, change with `fn`, write back only if nobody wrote in between; retried.

        `fn` gets the current value (None when absent or unreadable) and returns the new one,
        or None to leave the key as it is. Raises Conflict after `tries` lost races.
        """
        value, _ = await self.kv_update_known(bucket, key, fn, kind=kind, known=None,
                                              tries=tries)
        return value

    async def kv_update_known(
        self, bucket: str, key: str, fn: Callable[[T | None], T | None], *, kind: type[T],
        known: tuple[T | None, int] | None, tries: int = CAS_TRIES,
    ) -> tuple[T | None, int]:
        """`kv_update` that first tries the value and revision this process last saw (no
        read when nobody else wrote since); the value and revision the key is left at.

        A stale `known` only costs the refused write: the next try reads the key again."""
        for _ in range(tries):
            current, revision = known if known is not None else await self.kv_get_rev(
                bucket, key, kind)
            known = None
            new = fn(current)
            if new is None:
                return current, revision
            written = await self.kv_put_at(bucket, key, _encode(new), revision)
            if written is not None:
                return new, written
        raise Conflict(f"{tries} concurrent writers beat every update of {bucket}/{key}")
