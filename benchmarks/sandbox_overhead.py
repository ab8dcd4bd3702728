"""What a sandbox adds to `execute_command`: the same command run directly and under
bubblewrap (network none and network proxy, the default), through the executor's own sandbox
classes (launcher, cgroups, rlimits and all). Network proxy is measured twice: as the executor
runs it (one forwarder per sandbox in a network namespace every command joins, where it can)
and with the fallback of a forwarder started with each command. Figures, not assertions.

    python -m benchmarks.sandbox_overhead [RUNS]     (default 40 runs per mode)
"""

from __future__ import annotations

import asyncio
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from actors.executor.sandbox import detect_sandbox
from actors.executor.sandbox.base import Sandbox
from contracts.config import load_settings


def _cpuacct() -> Path | None:
    """A cgroup v1 cpuacct group of our own (root only), so the CPU time of every process a
    command starts is counted, those inside bwrap's namespaces too (RUSAGE_CHILDREN misses
    what bwrap's own init reaps). None where it cannot be made."""
    base = Path("/sys/fs/cgroup/cpuacct")
    group = base / f"wm-bench-{os.getpid()}"
    try:
        group.mkdir(exist_ok=True)
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        return None
    return group


_GROUP = _cpuacct()


def _leave_cpuacct() -> None:
    if _GROUP is not None:
        Path("/sys/fs/cgroup/cpuacct/cgroup.procs").write_text(str(os.getpid()))
        _GROUP.rmdir()


def _children_cpu() -> float:
    """CPU seconds of this process's children so far (our cgroup minus ourselves, else
    what the kernel reports for reaped children)."""
    if _GROUP is not None:
        me = resource.getrusage(resource.RUSAGE_SELF)
        total = int((_GROUP / "cpuacct.usage").read_text()) / 1e9
        return total - me.ru_utime - me.ru_stime
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


async def _timings(sb: Sandbox, home: Path, command: str, runs: int) -> tuple[list[float], float]:
    """Wall time of each run, and the CPU time per run of every process it started (launcher,
    bwrap, forwarder, shell: less sensitive to a busy machine than wall time)."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    out: list[float] = []
    cpu = 0.0
    for i in range(runs + 3):  # three warm-up runs (page cache, first cgroup)
        if i == 3:
            cpu = _children_cpu()
        t0 = time.perf_counter()
        res = await sb.run(command, cwd=home / "workspace", timeout=30, output_limit=2000,
                           env=env)
        elapsed = time.perf_counter() - t0
        if res.exit_code != 0:
            raise RuntimeError(f"{sb.kind}: {command!r} failed: {res.output.strip()}")
        if i >= 3:
            out.append(elapsed)
    return out, (_children_cpu() - cpu) / runs


async def _mode(mode: str, network: str, command: str, runs: int,
                per_command: bool = False) -> tuple[list[float], float]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        (home / "workspace").mkdir(parents=True)  # as the executor makes it
        environ = {k: v for k, v in os.environ.items() if not k.startswith("WM__")}
        environ.update({"WM__EXECUTOR__MODE": mode, "WM__EXECUTOR__NETWORK": network})
        settings = load_settings(home, environ)
        sb = await detect_sandbox(settings.config, settings.home)
        try:
            if sb.kind != mode:
                raise RuntimeError(f"wanted a {mode} sandbox, got {sb.kind}: {sb.note}")
            net = getattr(sb, "net", None)
            if per_command and net is not None:
                await net.disable()
            return await _timings(sb, settings.home, command, runs)
        finally:
            await sb.close()


def figures(runs: int = 40, command: str = "true") -> dict[str, Any]:
    """p50/p95 in ms of `command` per mode, and bubblewrap's p50 over direct."""
    if shutil.which("bwrap") is None:
        return {"skipped": "bwrap is not installed"}
    result: dict[str, Any] = {"command": command, "runs": runs, "load": os.getloadavg()[0],
                              "cpu_counted": "cgroup" if _GROUP is not None else "reaped"}
    modes = {"direct": ("direct", "none", False), "bwrap_network_none": ("bwrap", "none", False),
             "bwrap_network_proxy": ("bwrap", "proxy", False),
             "bwrap_proxy_per_command": ("bwrap", "proxy", True)}
    for label, (mode, network, per_command) in modes.items():
        t, cpu = asyncio.run(_mode(mode, network, command, runs, per_command))
        q = statistics.quantiles(t, n=20)
        result[label] = {"p50_ms": round(statistics.median(t) * 1000, 2),
                         "p95_ms": round(q[18] * 1000, 2), "cpu_ms": round(cpu * 1000, 2)}
    direct = result["direct"]
    for label in ("bwrap_network_none", "bwrap_network_proxy", "bwrap_proxy_per_command"):
        result[label]["over_direct_ms"] = round(result[label]["p50_ms"] - direct["p50_ms"], 2)
        result[label]["cpu_over_direct_ms"] = round(result[label]["cpu_ms"] - direct["cpu_ms"], 2)
    return result


def main(argv: list[str]) -> None:
    runs = int(argv[0]) if argv else 40
    try:
        fig = figures(runs)
    finally:
        _leave_cpuacct()
    if "skipped" in fig:
        print(f"sandbox overhead: skipped ({fig['skipped']})")
        return
    print(f"execute_command {fig['command']!r}, {runs} runs each, load {fig['load']:.1f} "
          "(goal: bwrap <= 8 ms over direct)")
    for label in ("direct", "bwrap_network_none", "bwrap_network_proxy", "bwrap_proxy_per_command"):
        f = fig[label]
        over = (f" (+{f['over_direct_ms']} ms wall, +{f['cpu_over_direct_ms']} ms CPU over "
                "direct)" if "over_direct_ms" in f else "")
        print(f"  {label:23s} p50 {f['p50_ms']:6.1f} ms  p95 {f['p95_ms']:6.1f} ms  "
              f"CPU {f['cpu_ms']:5.1f} ms{over}")


if __name__ == "__main__":
    main(sys.argv[1:])
