"""Start-up and footprint: `wintermute up` until all eight actors report health, the CPU each
actor spent before its first health report (its imports and on_start), what each actor's
module costs to import, and the memory of every process at rest. Figures, not assertions.

    python -m benchmarks.startup [RUNS]      (default 2 runs: a fresh home, then the same home)

Wall times depend on the machine's load (printed beside them); CPU seconds much less so. Our
packages' bytecode is compiled first, as an installed agent has it (see compile_bytecode). The
floor line is one process of the interpreter, asyncio and nats.py, connected and idle: what
every Python process of the agent pays before any of our code (benchmarks/_floor.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from actors import ACTORS
from bus import Bus
from contracts import Health
from supervisor.process.natsauth import connect_kwargs

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")
GOALS = {"all_healthy_s": 2.0, "import_s": 0.4, "idle_rss_mb": 300.0}


def _cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _memory(pid: int) -> tuple[float, float]:
    """(RSS, PSS) in MB."""
    rss = pss = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Rss:"):
            rss = int(line.split()[1])
        elif line.startswith("Pss:"):
            pss = int(line.split()[1])
    return rss / 1024, pss / 1024


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WM__", "OPENAI_", "ANTHROPIC_", "OLLAMA_"))}
    # A model that is never called: start-up does not talk to it.
    env.update({"WINTERMUTE_HOME": str(home), "WM__MODELS__DEFAULT": "openai/test-model",
                "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "PYTHONUNBUFFERED": "1"})
    return env


async def _watch(home: Path, started: float, settle: float) -> dict[str, Any]:
    runtime = home / "data" / "runtime.json"
    while not runtime.exists():  # noqa: ASYNC110 - a file another process writes
        await asyncio.sleep(0.01)
    out: dict[str, Any] = {"runtime_s": round(time.time() - started, 2)}
    info = json.loads(runtime.read_text())
    bus = await Bus(info["nats_url"], "wm").connect(timeout=30, **connect_kwargs(home, "supervisor"))
    actors: dict[str, dict[str, float]] = {}
    pids: dict[str, int] = {}
    try:
        while len(actors) < len(ACTORS) and time.time() - started < 120:
            for name in ACTORS:
                if name in actors:
                    continue
                health = await bus.kv_get_as(bus.subjects.kv_health, name, Health)
                if health is not None and health.started >= started:
                    pids[name] = health.pid
                    actors[name] = {"health_s": round(time.time() - started, 2),
                                    "cpu_to_health_s": round(_cpu(health.pid), 3)}
            await asyncio.sleep(0.02)
    finally:
        await bus.close()
    out["all_healthy_s"] = round(time.time() - started, 2)
    out["actors"] = actors
    await asyncio.sleep(settle)  # at rest: nothing asked of anyone
    pids.update(supervisor=info["supervisor_pid"], **({"nats-server": info["nats_pid"]}
                                                      if info.get("nats_pid") else {}))
    rest = {}
    for name, pid in pids.items():
        rss, pss = _memory(pid)
        rest[name] = {"rss_mb": round(rss, 1), "pss_mb": round(pss, 1)}
    out["idle"] = rest
    out["idle_rss_mb"] = round(sum(p["rss_mb"] for p in rest.values()), 1)
    out["idle_pss_mb"] = round(sum(p["pss_mb"] for p in rest.values()), 1)
    out["floor"] = _floor(info["nats_url"], home)
    return out


def _floor(url: str, home: Path) -> dict[str, float]:
    """One process of interpreter + asyncio + nats.py, connected as `cli` and idle (MB)."""
    kw = connect_kwargs(home, "cli")
    res = subprocess.run([sys.executable, "-m", "benchmarks._floor", url, kw["seed"], kw["inbox"]],
                         cwd=ROOT, text=True, capture_output=True, check=True, timeout=120)
    return {str(k): float(v) for k, v in json.loads(res.stdout).items()}


def up_figures(home: Path, settle: float = 5.0) -> dict[str, Any]:
    """One `wintermute up` on `home` (fresh or not) until all actors are healthy, then at rest."""
    home.mkdir(parents=True, exist_ok=True)
    fresh = not (home / "data").exists()
    started = time.time()
    with (home.parent / f"{home.name}-up.log").open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "supervisor.cli.main", "up"],
                                env=_env(home), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        out = asyncio.run(_watch(home, started, settle))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return {"home": "fresh" if fresh else "existing", "load": os.getloadavg()[0], **out}


def import_figures() -> dict[str, dict[str, float]]:
    """Per actor: wall and CPU seconds of a new interpreter importing the actor's code (what
    `python -m actors NAME` loads before connecting; on_start's imports are in up_figures)."""
    code = ("import resource, sys, time\nt = time.perf_counter()\n"
            "from actors.runtime import actor_class\nactor_class(sys.argv[1])\n"
            "r = resource.getrusage(resource.RUSAGE_SELF)\n"
            "print(time.perf_counter() - t, r.ru_utime + r.ru_stime, r.ru_maxrss / 1024)")
    out = {}
    for name in ACTORS:
        res = subprocess.run([sys.executable, "-c", code, name], cwd=ROOT, text=True,
                             capture_output=True, check=True)
        wall, cpu, rss = (float(x) for x in res.stdout.split())
        out[name] = {"import_s": round(wall, 3), "process_cpu_s": round(cpu, 3),
                     "rss_mb": round(rss, 1)}
    return out


PACKAGES = ("actors", "bus", "contracts", "kit", "state", "supervisor", "benchmarks")


def compile_bytecode() -> None:
    """Compile our packages' bytecode, as `pip install` (and the image) does: with an editable
    install and PYTHONDONTWRITEBYTECODE set (as in this repository's shells) every process would
    otherwise compile our code from source at each start (measured: ~5 MB RSS and ~15 MB PSS
    more at rest over all processes, ~0.03 CPU-s more per actor), which no installed agent
    pays. Python reads the bytecode whatever that variable says."""
    import compileall

    for package in PACKAGES:
        compileall.compile_dir(str(ROOT / package), quiet=1)


def figures(runs: int = 2) -> dict[str, Any]:
    """`runs` starts of one home (the first fresh), and the import costs."""
    compile_bytecode()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        ups = [up_figures(home) for _ in range(runs)]
    return {"goals": GOALS, "up": ups, "imports": import_figures()}


def main(argv: list[str]) -> None:
    fig = figures(int(argv[0]) if argv else 2)
    for run in fig["up"]:
        print(f"up ({run['home']} home, load {run['load']:.1f}): runtime.json after "
              f"{run['runtime_s']} s, all 8 actors healthy after {run['all_healthy_s']} s "
              f"(goal <= {GOALS['all_healthy_s']} s)")
        for name, a in sorted(run["actors"].items(), key=lambda kv: kv[1]["health_s"]):
            mem = run["idle"].get(name, {})
            print(f"  {name:10s} healthy at {a['health_s']:5.2f} s, {a['cpu_to_health_s']:.2f} "
                  f"CPU-s before; at rest RSS {mem.get('rss_mb', 0):5.1f} MB "
                  f"PSS {mem.get('pss_mb', 0):5.1f} MB")
        for name in ("supervisor", "nats-server"):
            if name in run["idle"]:
                mem = run["idle"][name]
                print(f"  {name:10s} at rest RSS {mem['rss_mb']:5.1f} MB PSS {mem['pss_mb']:5.1f} MB")
        print(f"  at rest, all processes: RSS {run['idle_rss_mb']} MB (goal <= "
              f"{GOALS['idle_rss_mb']} MB), PSS {run['idle_pss_mb']} MB")
        floor, pythons = run["floor"], len(run["idle"]) - ("nats-server" in run["idle"])
        nats_rss = run["idle"].get("nats-server", {}).get("rss_mb", 0.0)
        print(f"  floor of one process (interpreter + asyncio + nats.py, connected, none of our "
              f"code): RSS {floor['rss_mb']} MB PSS {floor['pss_mb']} MB; {pythons} such "
              f"processes + nats-server: RSS {round(pythons * floor['rss_mb'] + nats_rss, 1)} MB")
    print(f"import of each actor's code (goal <= {GOALS['import_s']} s before ready):")
    for name, i in fig["imports"].items():
        print(f"  {name:10s} {i['import_s']:.3f} s wall, {i['process_cpu_s']:.3f} CPU-s for the "
              f"whole interpreter, peak RSS {i['rss_mb']} MB")
    print(json.dumps(fig))


if __name__ == "__main__":
    main(sys.argv[1:])
