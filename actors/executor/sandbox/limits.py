"""Resource limits for sandboxed commands, and finding every process a command started.

bubblewrap gives no limits of its own. Each bwrap command gets a fresh cgroup (pids and memory
controllers) when this process may create one: cgroup v2 with the controllers delegated, or
writable v1 hierarchies. What no cgroup covers falls back to rlimits: RLIMIT_NPROC (per user,
so set to the tasks this user already runs plus the limit; not enforced for root), RLIMIT_AS
for memory. RLIMIT_FSIZE and RLIMIT_CPU are always set. launcher.py applies all of it in the
child before bwrap starts.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from actors.executor._proctree import launcher_argv
from contracts.config import SandboxConfig

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
_counter = itertools.count()
REMOVE_WAIT = 1.0  # seconds to wait for a command's killed processes to leave its cgroup


@dataclass(frozen=True)
class Limits:
    """The per-command limits, from [sandbox] in config.toml."""

    pids: int
    memory_mb: int
    file_size_mb: int
    cpu_secs: int

    @classmethod
    def from_config(cls, sb: SandboxConfig) -> Limits:
        return cls(pids=sb.pids_limit, memory_mb=sb.memory_mb, file_size_mb=sb.file_size_mb,
                   cpu_secs=sb.cpu_secs)


@dataclass(frozen=True)
class Hierarchy:
    """A cgroup folder under which this process may create children, and what it controls."""

    base: Path
    controllers: frozenset[str]


def _own_paths(proc_cgroup: Path) -> dict[str, str]:
    """controller (or "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    out: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in proc_cgroup.read_text().splitlines():
            _, names, path = line.split(":", 2)
            for name in names.split(",") if names else [""]:
                out[name] = path
    return out


def _writable(base: Path) -> bool:
    probe = base / f"wm-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError:
        return False
    with contextlib.suppress(OSError):
        probe.rmdir()
    return True


def detect_cgroups(root: Path = CGROUP_ROOT,
                   proc_cgroup: Path = Path("/proc/self/cgroup")) -> list[Hierarchy]:
    """Where per-command cgroups can go: v1 pids/memory hierarchies, or a delegated v2 one."""
    own = _own_paths(proc_cgroup)
    found: list[Hierarchy] = []
    for name in ("pids", "memory"):
        base = root / name / own.get(name, "/").lstrip("/")
        if name in own and (base / "cgroup.procs").exists() and _writable(base):
            found.append(Hierarchy(base, frozenset({name})))
    if found or "" not in own:
        return found
    for mount in (root, root / "unified"):
        if not (mount / "cgroup.controllers").exists():
            continue
        base = mount / own[""].lstrip("/")
        try:
            enabled = set((base / "cgroup.subtree_control").read_text().split())
        except OSError:
            continue
        usable = enabled & {"pids", "memory"}
        if usable and _writable(base):
            found.append(Hierarchy(base, frozenset(usable)))
        break
    return found


def _user_tasks() -> int:
    """Threads this real user runs now (what RLIMIT_NPROC counts)."""
    uid, total = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = dict(line.split(":", 1) for line in
                          Path(entry.path, "status").read_text().splitlines() if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                total += int(fields["Threads"])
    return total


class CommandLimits:
    """Creates the cgroups of one command, builds its launcher argv, and cleans up after it."""

    def __init__(self, limits: Limits, hierarchies: list[Hierarchy]) -> None:
        self.limits = limits
        self.hierarchies = hierarchies
        self.controllers = frozenset().union(*(h.controllers for h in hierarchies))

    def describe(self) -> str:
        """One phrase for the sandbox note: what is limited, and how."""
        lim = self.limits
        how = ("cgroup" if self.controllers >= {"pids", "memory"} else
               "cgroup + rlimits" if self.controllers else "rlimits")
        root = os.geteuid() == 0 and "pids" not in self.controllers
        procs = ("processes unlimited (rlimits do not bind root and no cgroup is available)"
                 if root else f"at most {lim.pids} processes")
        cpu = f", {lim.cpu_secs} CPU seconds per process" if lim.cpu_secs else ""
        return (f"limits per command ({how}): {procs}, {lim.memory_mb} MB memory, files up to "
                f"{lim.file_size_mb} MB{cpu}")

    def create(self) -> list[Path]:
        """Fresh cgroups for one command with the limits written; [] without cgroups."""
        name = f"wintermute-{os.getpid()}-{next(_counter)}"
        made: list[Path] = []
        try:
            for h in self.hierarchies:
                path = h.base / name
                path.mkdir()
                made.append(path)
                if "pids" in h.controllers:
                    (path / "pids.max").write_text(str(self.limits.pids))
                if "memory" in h.controllers:
                    size = str(self.limits.memory_mb << 20)
                    v2 = (path / "memory.max").exists()
                    (path / ("memory.max" if v2 else "memory.limit_in_bytes")).write_text(size)
                    if v2:
                        with contextlib.suppress(OSError):
                            (path / "memory.swap.max").write_text("0")
        except OSError:
            self.remove(made)
            raise
        return made

    def argv(self, command: list[str], cgroups: list[Path], *, subreaper: bool = False) -> list[str]:
        """The launcher command line that applies the limits and then runs command."""
        lim = self.limits
        rlimits = {"RLIMIT_FSIZE": lim.file_size_mb << 20}
        if lim.cpu_secs:
            rlimits["RLIMIT_CPU"] = lim.cpu_secs
        if "memory" not in self.controllers:
            rlimits["RLIMIT_AS"] = lim.memory_mb << 20
        if "pids" not in self.controllers:
            rlimits["RLIMIT_NPROC"] = _user_tasks() + lim.pids
        return launcher_argv(command, cgroups=cgroups, rlimits=rlimits, subreaper=subreaper)

    def remove(self, cgroups: list[Path]) -> None:
        """Kill whatever is left in the command's cgroups and remove them."""
        for path in cgroups:
            # Right after a command ends its namespace's init is often still exiting (it dies
            # of bwrap's parent-death signal, asynchronously): retry at once and back off, so
            # the usual sub-millisecond wait does not cost a fixed 20 ms sleep per command.
            deadline, delay = time.monotonic() + REMOVE_WAIT, 0.0002
            while True:
                with contextlib.suppress(OSError):
                    for pid in (path / "cgroup.procs").read_text().split():
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.kill(int(pid), signal.SIGKILL)
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        log.warning("could not remove the cgroup %s", path)
                        break
                    time.sleep(delay)  # killed processes are still being reaped
                    delay = min(delay * 2, 0.02)
