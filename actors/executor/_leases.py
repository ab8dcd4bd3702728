"""Commands the executor has running, written down on disk, so that the next executor ends
what a killed one left behind (seed 003 invariant I: leftovers killed within 30 s).

A command's launcher (direct mode: the subreaper of everything it starts; bwrap's sandbox
under it) leads its own session and outlives an executor killed with SIGKILL, which runs no
cleanup. Each started command gets a lease file `<pid>` holding the process's start time (so
a recycled pid is never mistaken for it); the file goes once the command has ended or been
killed. At start-up the executor sweeps the folder: every lease whose process still runs
with that start time is a leftover, and its whole tree is killed.

There is one executor per process in production, so the folder is module state set once by
the executor at start-up (`use`); without it (unit tests of run_process) nothing is leased.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from pathlib import Path

from actors.executor._proctree import kill_tree

log = logging.getLogger(__name__)

_folder: Path | None = None


def use(folder: Path | None) -> None:
    """Lease commands in `folder` from now on (None: stop leasing)."""
    global _folder
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    _folder = folder


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


def take(pid: int) -> Path | None:
    """Write down that pid, a command's launcher, is running; the lease to `release`."""
    if _folder is None or (started := start_time(pid)) is None:
        return None
    lease = _folder / str(pid)
    try:
        lease.write_text(started)
    except OSError as exc:  # a full disk must not stop commands; say what is at stake
        log.warning("could not record command %s for clean-up after a crash: %s", pid, exc)
        return None
    return lease


def release(lease: Path | None) -> None:
    if lease is not None:
        with contextlib.suppress(OSError):
            lease.unlink()


def sweep(folder: Path) -> list[tuple[int, str]]:
    """Kill every process tree a previous executor left running; return their root pids,
    each with its start time (which, with the pid, names that process uniquely)."""
    killed: list[tuple[int, str]] = []
    if not folder.is_dir():
        return killed
    for lease in folder.iterdir():
        try:
            pid, started = int(lease.name), lease.read_text().strip()
        except (OSError, ValueError):
            release(lease)
            continue
        if start_time(pid) == started:
            kill_tree(pid)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)  # the launcher leads its own session
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            killed.append((pid, started))
        release(lease)
    return killed


async def adopt(home: Path) -> list[tuple[int, str]]:
    """At the executor's start: end what a killed executor of this home left running, then
    lease this executor's commands in the same folder."""
    import asyncio

    folder = home / "data" / "executor" / "running"
    killed = await asyncio.to_thread(sweep, folder)
    if killed:
        log.warning("killed %d command(s) left running by an executor that died: pids %s",
                    len(killed), ", ".join(str(pid) for pid, _ in killed))
    use(folder)
    return killed
