"""One network namespace per bwrap sandbox with network "proxy", joined by every command.

Starting the egress forwarder (forward.py) inside each command's namespace costs a second
Python interpreter per command (~10 ms of CPU). Instead the forwarder runs once per sandbox, in
`init` mode, inside a long-lived bubblewrap of its own (read-only system folders and the egress
socket's folder; nothing of the home; no capabilities) whose fresh network namespace has only
loopback. Every command's launcher execs `nsenter --net=<that namespace>` and then bwrap with
`--share-net`: the command still gets its own pid, ipc, uts and mount namespaces, and finds
127.0.0.1:3128 already listening. The namespace has no other interface, so the egress proxy
stays the only way out.

The executor holds the namespace by an fd opened from the holder's /proc entry and checked
against the inode bwrap reported (`--info-fd`), so a reused pid can never point a command at
another namespace. Joining a network namespace needs CAP_SYS_ADMIN over the user namespace that
owns it: root has it; a non-root executor first joins that user namespace (the holder's, found
with NS_GET_USERNS on the namespace's fd; `nsenter --preserve-credentials`), and bwrap then
nests the command's own user namespace in it with the executor's uid and gid, as a command in a
namespace of its own sees them. Where commands cannot join (no nsenter, or nsenter refused),
`enter` returns None and the sandbox keeps a forwarder per command. A holder that died is
started afresh before the next command.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import shutil
from collections.abc import Sequence

import msgspec

from actors.executor.sandbox.base import EGRESS_INSIDE, EGRESS_SOCKET, FORWARD_SOURCE, PROXY_PORT

log = logging.getLogger(__name__)

START_TIMEOUT = 15.0  # generous: a busy machine starts bwrap and an interpreter slowly
NS_GET_USERNS = 0xB701  # ioctl on a namespace fd: an fd of the user namespace that owns it
LISTENING = f"0100007F:{PROXY_PORT:04X} 00000000:0000 0A"  # /proc/net/tcp: 127.0.0.1:3128 LISTEN


class _Info(msgspec.Struct, rename="kebab"):
    """What bwrap writes to --info-fd once its namespaces exist."""

    child_pid: int
    net_namespace: int


def _read_all(fd: int) -> bytes:
    """Everything bwrap writes to the info pipe (it closes its end after writing)."""
    chunks: list[bytes] = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    return b"".join(chunks)


def _listening(pid: int) -> bool:
    """Whether 127.0.0.1:PROXY_PORT listens in pid's network namespace (a /proc read)."""
    try:
        with open(f"/proc/{pid}/net/tcp") as fh:
            return LISTENING in fh.read()
    except OSError:
        return False


class SharedNet:
    """The holder of a sandbox's network namespace and the forwarder in it."""

    def __init__(self, sandbox_args: Sequence[str], python: str) -> None:
        """sandbox_args: bwrap and its filesystem options (no command); python: the forwarder's
        interpreter as seen inside."""
        self.args = list(sandbox_args)
        self.python = python
        self.nsenter = shutil.which("nsenter")
        self.proc: asyncio.subprocess.Process | None = None
        self.fd: int | None = None
        self.user_fd: int | None = None
        self.root = os.geteuid() == 0
        self.usable = self.nsenter is not None
        # what bwrap needs in the joined namespace: keep it; without root, the command's uid/gid
        self.bwrap_args = ["--share-net"] + ([] if self.root else [
            "--uid", str(os.getuid()), "--gid", str(os.getgid())])
        self._lock = asyncio.Lock()

    async def enter(self) -> list[str] | None:
        """The argv prefix that puts a command into the namespace (starting the holder if it is
        not running), or None where commands cannot share one."""
        if not self.usable:
            return None
        async with self._lock:
            if self.proc is None or self.proc.returncode is not None or self.fd is None:
                await self._stop()
                try:
                    await self._start()
                except (OSError, RuntimeError, TimeoutError, msgspec.ValidationError,
                        msgspec.DecodeError) as exc:
                    await self._stop()
                    self.usable = False
                    log.warning("bwrap: no shared network namespace (%s); the egress forwarder "
                                "starts with each command instead", exc)
                    return None
            return self._prefix()

    def _prefix(self) -> list[str]:
        me = f"/proc/{os.getpid()}/fd"
        user = ([] if self.user_fd is None else
                ["--preserve-credentials", f"--user={me}/{self.user_fd}"])
        return [str(self.nsenter), *user, f"--net={me}/{self.fd}", "--"]

    async def _start(self) -> None:
        read, write = os.pipe()
        try:
            try:
                self.proc = await asyncio.create_subprocess_exec(
                    *self.args, "--info-fd", str(write), "--", self.python, "-I", "-S", "-c",
                    FORWARD_SOURCE, "init", str(PROXY_PORT), f"{EGRESS_INSIDE}/{EGRESS_SOCKET}",
                    stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.DEVNULL, pass_fds=(write,), start_new_session=True)
            finally:
                os.close(write)  # bwrap's copy is the only writer: EOF once it has written
            raw = await asyncio.wait_for(asyncio.to_thread(_read_all, read), START_TIMEOUT)
        finally:
            os.close(read)
        if not raw:
            raise RuntimeError(f"bwrap exited with code {await self.proc.wait()}")
        info = msgspec.json.decode(raw, type=_Info)
        fd = os.open(f"/proc/{info.child_pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        self.fd = fd
        if os.fstat(fd).st_ino != info.net_namespace:  # the pid was reused: not our namespace
            raise RuntimeError("the forwarder's namespace ended while it was being opened")
        if not self.root:
            self.user_fd = fcntl.ioctl(fd, NS_GET_USERNS)
            os.set_inheritable(self.user_fd, False)
        await self._wait_listening(info.child_pid)
        probe = await asyncio.create_subprocess_exec(
            *self._prefix(), "true",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL)
        if await probe.wait() != 0:
            raise RuntimeError("nsenter may not join it")

    async def _wait_listening(self, pid: int) -> None:
        """Until the forwarder listens, so a command's first request finds the port open."""
        loop = asyncio.get_running_loop()
        deadline, delay = loop.time() + START_TIMEOUT, 0.001
        while True:
            assert self.proc is not None
            if self.proc.returncode is not None:
                raise RuntimeError(f"the forwarder exited with code {self.proc.returncode}")
            if _listening(pid):
                return
            if loop.time() > deadline:
                raise TimeoutError("the forwarder did not listen in time")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)

    async def _stop(self) -> None:
        for fd in (self.fd, self.user_fd):
            if fd is not None:
                os.close(fd)
        self.fd = self.user_fd = None
        proc, self.proc = self.proc, None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()  # bwrap's namespace init and the forwarder die with it
            await proc.wait()

    async def disable(self) -> None:
        """Stop the holder; commands start their own forwarder from now on."""
        async with self._lock:
            self.usable = False
            await self._stop()

    async def close(self) -> None:
        async with self._lock:
            await self._stop()
