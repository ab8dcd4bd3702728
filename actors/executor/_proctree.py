"""Every process a command started: the launcher that starts commands (limits, subreaper), and
finding and killing through /proc all it started, including processes that left its process
group or session (setsid): with the launcher as their subreaper they stay in its tree."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

log = logging.getLogger(__name__)

LAUNCHER_SOURCE = (Path(__file__).parent / "sandbox" / "launcher.py").read_text()


def launcher_argv(command: Sequence[str], *, cgroups: Sequence[Path] = (),
                  rlimits: dict[str, int] | None = None, subreaper: bool = False) -> list[str]:
    """Run command through launcher.py: join cgroups (their folders), set rlimits, and with
    subreaper stay the reaper of everything it starts."""
    spec = [f"cgroup={p / 'cgroup.procs'}" for p in cgroups]
    spec += [f"rlimit={name}={int(value)}" for name, value in (rlimits or {}).items()]
    spec += ["subreaper"] if subreaper else []
    return [sys.executable, "-I", "-S", "-c", LAUNCHER_SOURCE, *spec, "--", *command]


def subreaper_launcher(command: Sequence[str]) -> list[str]:
    """No limits, but every process the command starts stays findable (direct mode)."""
    return launcher_argv(command, subreaper=True)


def descendants(root: int) -> set[int]:
    """Live (non-zombie) descendants of root, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if state != "Z":
            children.setdefault(int(ppid), []).append(int(entry.name))
    out: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def _signal_all(pids: set[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def kill_tree(root: int, rounds: int = 100) -> None:
    """SIGKILL every descendant of root; root itself is left for the caller.

    Everything is stopped first, round by round until no new process appears (a stopped
    process can neither fork nor report its children's deaths), then killed at once."""
    for _ in range(rounds):
        stopped: set[int] = set()
        for _ in range(rounds):
            new = descendants(root) - stopped
            if not new:
                break
            _signal_all(new, signal.SIGSTOP)
            stopped |= new
        if not stopped:
            return
        _signal_all(stopped, signal.SIGKILL)
        time.sleep(0.005)
    log.warning("processes under %s kept appearing after %s kill rounds", root, rounds)
