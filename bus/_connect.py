"""How a connection to NATS tells slow from hung, and how a failure to connect is worded."""

from __future__ import annotations

import asyncio
import contextlib
import errno
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

#: The first attempt's handshake timeout; doubled after each attempt that timed out.
FIRST_TIMEOUT = 2.0
#: The longest a handshake phase (TCP connect, INFO, CONNECT/PONG) is given.
MAX_TIMEOUT = 30.0


@dataclass
class AdaptiveTimeout:
    """The per-attempt handshake timeout of one client, for its first connection and every
    reconnection.

    A server that refuses the TCP connection is down: retried at once, with the same timeout.
    A server that accepts but does not finish the handshake in time is busy (a loaded CPU, a
    restart replaying its store) or hung (SIGSTOP): the next attempt waits twice as long, up
    to MAX_TIMEOUT, instead of starting the handshake over every 2 s, which on a busy machine
    never converges. A completed connection starts over at FIRST_TIMEOUT.
    """

    current: float = FIRST_TIMEOUT
    timed_out: int = 0

    def failed(self, exc: BaseException) -> None:
        if is_timeout(exc):
            self.timed_out += 1
            self.current = min(self.current * 2, MAX_TIMEOUT)

    def connected(self) -> None:
        self.current, self.timed_out = FIRST_TIMEOUT, 0


def is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, TimeoutError) or (
        isinstance(exc, OSError) and exc.errno == errno.ETIMEDOUT)


def is_refusal(exc: BaseException) -> bool:
    """The server refused the credentials: a retry with the same ones cannot succeed."""
    from nats import errors

    return isinstance(exc, errors.AuthorizationError) or "authorization" in str(exc).lower()


async def first_of(work: Awaitable[T], stop: asyncio.Event, timeout: float) -> T:
    """`work`'s result, unless `stop` is set first (then the last error stands, as
    TimeoutError's cause) or `timeout` passes (TimeoutError)."""
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait({task, stopped}, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            return task.result()
        raise TimeoutError("stopped" if stopped in done else f"no connection in {timeout}s")
    finally:
        for pending in (task, stopped):
            if not pending.done():
                pending.cancel()
                with contextlib.suppress(BaseException):
                    await pending


class HandshakeResets:
    """A first connection whose handshake the server keeps cutting off.

    nats-server answers a refused credential with `-ERR 'Authorization Violation'` and closes
    at once; when the client's PING is still unread on its side (a busy machine delivers it
    late), the close is a TCP reset that destroys the -ERR before nats.py reads it. So a
    credential refused on a busy machine looks like "connection reset by peer", attempt after
    attempt. RESETS of those in a row, with credentials presented, are taken as the refusal
    they almost always are, instead of retrying until the caller's timeout.
    """

    RESETS = 3

    def __init__(self, with_credentials: bool) -> None:
        self.with_credentials = with_credentials
        self.seen = 0

    def count(self, exc: BaseException) -> bool:
        """Note one failed attempt; True once it is time to stop."""
        if isinstance(exc, ConnectionResetError) or "reset by peer" in str(exc).lower():
            self.seen += 1
        else:
            self.seen = 0
        return self.with_credentials and self.seen >= self.RESETS

    def cause(self, exc: BaseException) -> BaseException:
        if self.with_credentials and self.seen >= self.RESETS:
            return ConnectionRefusedByServer(
                f"the server cut the handshake off {self.seen} times in a row: most likely an "
                "authorization violation (it refused these credentials)")
        return exc


class ConnectionRefusedByServer(Exception):
    """What HandshakeResets concluded; `describe` words it as a refusal."""


def describe(exc: BaseException | None, waited: float) -> str:
    """Why a connection could not be made, as words (never empty)."""
    from nats import errors

    if exc is None or is_timeout(exc):
        return (f"no answer in {waited:.0f}s (the server is down, hung or very busy; "
                "`wintermute status` shows whether it runs)")
    if isinstance(exc, ConnectionRefusedError):
        return ("connection refused: nothing listens there (is `wintermute up` running, and "
                "is this the URL it printed?)")
    if isinstance(exc, ConnectionRefusedByServer):
        return (f"{exc} (with the embedded server, let `wintermute up` create them again by "
                "restarting it)")
    if is_refusal(exc):
        return ("authorization violation: the server refused these credentials (with the "
                "embedded server, let `wintermute up` create them again by restarting it)")
    if isinstance(exc, errors.NoServersError):
        return "no server could be reached at that address"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
