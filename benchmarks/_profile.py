"""Where an actor's CPU goes during a benchmark: py-spy samples, folded into the functions that
hold the most time (inclusive). py-spy is optional (`pip install py-spy`); without it, or
where the kernel refuses ptrace, the profile says so instead."""

from __future__ import annotations

import collections
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def py_spy() -> str | None:
    """The py-spy executable next to this Python, or on PATH."""
    here = Path(sys.executable).with_name("py-spy")
    return str(here) if here.exists() else shutil.which("py-spy")


class Sampler:
    """py-spy recording the given processes until `stop()`."""

    def __init__(self, pids: dict[str, int], rate: int = 200) -> None:
        self.exe = py_spy()
        self.dir = Path(tempfile.mkdtemp(prefix="wm-prof-"))
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        if self.exe is None:
            return
        for name, pid in pids.items():
            self.procs[name] = subprocess.Popen(
                [self.exe, "record", "-p", str(pid), "-r", str(rate), "-f", "raw", "--nonblocking",
                 "-o", str(self.dir / f"{name}.txt")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self, top: int = 8) -> dict[str, list[str] | str]:
        """Stop sampling; per process its `top` functions as "share% function (file)"."""
        if self.exe is None:
            return {"profile": "not measured: py-spy is not installed (pip install py-spy)"}
        out: dict[str, list[str] | str] = {}
        for name, proc in self.procs.items():
            proc.send_signal(2)  # SIGINT: py-spy writes what it has
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
            path = self.dir / f"{name}.txt"
            out[name] = fold(path, top) if path.exists() else "not measured: py-spy could not attach"
        shutil.rmtree(self.dir, ignore_errors=True)
        return out


def fold(path: Path, top: int) -> list[str]:
    """Where the samples of a raw py-spy file end (self time), and the functions of our own
    code (actors/, bus/, state/, kit/) holding the most time inclusively."""
    leaf: collections.Counter[str] = collections.Counter()
    ours: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        leaf[_key(frames[-1])] += n
        seen: set[str] = set()
        for frame in frames:
            key = _key(frame)
            if key not in seen and any(f"({p}/" in frame for p in _OURS) \
                    and not key.startswith(("Consumer.", "main ", "<module> ", "run_actor ")):
                seen.add(key)
                ours[key] += n
    if not total:
        return []
    return ([f"self {100 * n / total:.0f}% {k}" for k, n in leaf.most_common(top // 2)]
            + [f"in {100 * n / total:.0f}% {k}" for k, n in ours.most_common(top // 2)])


_OURS = ("actors", "bus", "state", "kit", "contracts")


def _key(frame: str) -> str:
    func, _, where = frame.partition(" (")
    return f"{func} ({where.split(':')[0].rsplit('/', 1)[-1]})"
