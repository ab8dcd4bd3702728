"""Run one shell command in its own process group with a timeout and a capped, merged output."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import re
import shutil
import signal
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import msgspec

from actors.executor import _leases
from actors.executor._proctree import kill_tree, subreaper_launcher
from kit.redact import Redactor, looks_secret_name, redact_patterns

READ_CHUNK = 65_536
POLL_SECS = 0.1  # how often to check whether bash exited while its output pipe stays open
DRAIN_GRACE_SECS = 1.0  # after bash exits, how long leftover processes may keep the pipe open
KILL_WAIT_SECS = 2.0  # after SIGKILL, how long to wait for the pipe to close
LINGER_NOTE = (
    "\n[background processes still held the output open after the command exited and were "
    "stopped; redirect their output (e.g. `cmd > log 2>&1 &`) to keep them running]"
)


class CommandResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of one command; exit_code is None when it was killed for timing out."""

    exit_code: int | None
    output: str
    timed_out: bool
    duration_ms: int
    truncated: bool


class _Capture:
    """Decodes output incrementally, keeping the first and the last `limit` characters."""

    def __init__(self, limit: int) -> None:
        self.limit = max(limit, 0)
        self.head = ""
        self.tail = ""
        self.total = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes, final: bool = False) -> None:
        """Add raw bytes (final=True flushes an incomplete UTF-8 sequence)."""
        text = self._decoder.decode(data, final)
        if not text:
            return
        self.total += len(text)
        if len(self.head) < self.limit:
            self.head += text[: self.limit - len(self.head)]
        self.tail = (self.tail + text)[-self.limit :] if self.limit else ""

    @property
    def truncated(self) -> bool:
        """True if more characters arrived than the limit."""
        return self.total > self.limit

    def render(self) -> str:
        """The output, or head + a cut marker + tail, at most `limit` characters."""
        if not self.truncated:
            return self.head
        budget = self.limit - len(self._marker(self.total))
        if budget <= 0:
            return self.head[: self.limit]
        head = self.head[: budget - budget // 2]
        tail = self.tail[len(self.tail) - budget // 2 :]
        return head + self._marker(self.total - len(head) - len(tail)) + tail

    @staticmethod
    def _marker(cut: int) -> str:
        return f"\n[... {cut} characters cut ...]\n"


# A URL carrying a password (postgres://user:pw@host, https://user:token@host): DATABASE_URL-style.
_URL_WITH_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@")


def scrubbed_env(
    environ: Mapping[str, str], secret_names: Iterable[str], redactor: Redactor | None = None,
) -> dict[str, str]:
    """Copy the environment without secrets: by name (.env names, secret-looking names, WM__*,
    NATS variables) and by value (any value holding a secret the redactor knows, a
    credential-shaped string, or a URL with a password), whatever the variable is called."""
    drop = set(secret_names)
    return {
        name: value
        for name, value in environ.items()
        if name not in drop
        and not looks_secret_name(name)
        and not name.startswith("WM__")
        and "NATS" not in name.upper()
        and not _secret_value(value, redactor)
    }


def _secret_value(value: str, redactor: Redactor | None) -> bool:
    if _URL_WITH_PASSWORD.search(value):
        return True
    if redactor is not None:
        return bool(redactor.scan(value)[1])
    return bool(redact_patterns(value)[1])


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL every process under pid, then the process group it leads (ignore what is gone).

    The tree first: processes that left the group (setsid, double fork) are still found there
    when proc is the launcher, their subreaper (direct mode)."""
    if proc.returncode is None:  # once reaped, its pid may belong to someone else
        kill_tree(proc.pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _close(proc: asyncio.subprocess.Process) -> None:
    """Close the subprocess transport and its pipes (no public API for this on Process)."""
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        transport.close()


async def _feed(pipe: asyncio.StreamWriter, data: bytes) -> None:
    """Write stdin and close it; a child that exits without reading it is fine."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        pipe.write(data)
        await pipe.drain()
        pipe.close()


async def _pump(stream: asyncio.StreamReader, capture: _Capture) -> None:
    """Read the stream to EOF into the capture."""
    while chunk := await stream.read(READ_CHUNK):
        capture.feed(chunk)
    capture.feed(b"", final=True)


async def _settle(proc: asyncio.subprocess.Process, reader: asyncio.Task[None]) -> None:
    """After a kill, wait briefly for the pipe to close and the process to be reaped."""
    await asyncio.wait({reader}, timeout=KILL_WAIT_SECS)
    if not reader.done():  # a process outside the group still holds the pipe
        reader.cancel()
        _close(proc)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), KILL_WAIT_SECS)


async def run_command(
    command: str,
    *,
    cwd: Path,
    timeout: float,
    output_limit: int,
    env: Mapping[str, str],
    stdin: bytes = b"",
) -> CommandResult:
    """Run `bash -c command` (see run_process) under a launcher that is the subreaper of
    everything it starts, so the timeout ends processes that left the session too."""
    bash = shutil.which("bash") or "/bin/bash"
    return await run_process(
        subreaper_launcher([bash, "-c", command]), cwd=cwd, timeout=timeout,
        output_limit=output_limit, env=env,
        stdin=stdin,
    )


async def run_process(
    argv: list[str],
    *,
    cwd: Path,
    timeout: float,  # noqa: ASYNC109 - the child's time limit, enforced by killing its group
    output_limit: int,
    env: Mapping[str, str],
    stdin: bytes = b"",
) -> CommandResult:
    """Run argv with stdin bytes (or /dev/null); kill its whole process group on timeout or
    cancellation. Sandboxes wrap their launcher (bwrap, ...) around the command this way.

    Raises OSError if the program cannot be started (for example, cwd does not exist).
    """
    started = time.monotonic()
    spawn = asyncio.ensure_future(asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=dict(env),
        stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    ))
    try:
        proc = await asyncio.shield(spawn)
    except asyncio.CancelledError:
        # Cancelled while asyncio was still connecting the pipes: the command already runs
        # (it may have started children). Cancelling the spawn would kill only the launcher
        # and orphan the rest, so let it finish, then kill the whole group.
        with contextlib.suppress(Exception):
            late = await spawn
            _kill_group(late)
            _close(late)
        raise
    lease = _leases.take(proc.pid)  # stays behind only if the executor dies uncleanly
    try:
        return await _supervise(proc, started, timeout, output_limit, stdin)
    finally:
        _leases.release(lease)


async def _supervise(
    proc: asyncio.subprocess.Process, started: float, timeout: float,  # noqa: ASYNC109
    output_limit: int, stdin: bytes,
) -> CommandResult:
    """Wait for proc within its time limit, capturing its output (see run_process)."""
    if stdin:
        assert proc.stdin is not None
        feeder = asyncio.create_task(_feed(proc.stdin, stdin))
        feeder.add_done_callback(lambda t: t.cancelled() or t.exception())
    assert proc.stdout is not None
    capture = _Capture(output_limit)
    reader = asyncio.create_task(_pump(proc.stdout, capture))
    timed_out = lingered = False
    try:
        try:
            async with asyncio.timeout(timeout):
                while not reader.done():
                    await asyncio.wait({reader}, timeout=POLL_SECS)
                    if not reader.done() and proc.returncode is not None:
                        await asyncio.wait({reader}, timeout=DRAIN_GRACE_SECS)
                        if not reader.done():
                            lingered = True
                            _kill_group(proc)
                            break
                if not lingered:
                    await proc.wait()
        except TimeoutError:
            timed_out = True
            _kill_group(proc)
        if timed_out or lingered:
            await _settle(proc, reader)
        if reader.done() and not reader.cancelled():
            reader.result()  # surface unexpected read errors
    except asyncio.CancelledError:
        _kill_group(proc)
        reader.cancel()
        _close(proc)
        raise
    output = capture.render() + (LINGER_NOTE if lingered else "")
    return CommandResult(
        exit_code=None if timed_out else proc.returncode,
        output=output,
        timed_out=timed_out,
        duration_ms=int((time.monotonic() - started) * 1000),
        truncated=capture.truncated,
    )
