"""Turn latency through real actor processes, and their memory, via `wintermute up`."""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TURNS = 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wm(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "supervisor.cli.main", *args], env=env, cwd=ROOT,
                          text=True, capture_output=True, timeout=120)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    port = free_port()
    fake = subprocess.Popen([sys.executable, "-m", "tests.fakes.llm_servers", "--kind", "openai",
                             "--port", str(port)], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            stderr=subprocess.DEVNULL)
    assert fake.stdout is not None
    url = fake.stdout.readline().strip()
    with tempfile.TemporaryDirectory() as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith("WM__")}
        env.update({"WINTERMUTE_HOME": home, "OPENAI_BASE_URL": url,
                    "WM__MODELS__DEFAULT": "openai/bench"})
        t0 = time.perf_counter()
        up = subprocess.Popen([sys.executable, "-m", "supervisor.cli.main", "up"], env=env, cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while True:
                out = wm(env, "status", "--json")
                if out.returncode == 0:
                    st = json.loads(out.stdout)
                    if len(st["actors"]) == 8 and all(a["healthy"] for a in st["actors"]):
                        break
                time.sleep(0.2)
            ready = time.perf_counter() - t0
            plain, tool = [], []
            for i in range(TURNS):
                t = time.perf_counter()
                wm(env, "chat", "--once", f"hello {i}")
                plain.append(time.perf_counter() - t)
                t = time.perf_counter()
                wm(env, "chat", "--once", f"run: echo {i}")
                tool.append(time.perf_counter() - t)
            st = json.loads(wm(env, "status", "--json").stdout)
            rss = {a["name"]: rss_mb(a["pid"]) for a in st["actors"] if a["pid"]}
        finally:
            up.terminate()
            up.wait(20)
            fake.terminate()
    print(f"up -> all 8 actors healthy: {ready:.2f} s")

    def pct(xs: list[float], p: float) -> float:
        return sorted(xs)[min(len(xs) - 1, int(p * len(xs)))] * 1000

    for name, xs in (("plain turn", plain), ("turn with one tool call", tool)):
        print(f"{name:24} (incl. `chat --once` process start): p50 {statistics.median(xs)*1000:.0f} ms, "
              f"p95 {pct(xs, 0.95):.0f} ms over {TURNS}")
    print("idle RSS per actor after the turns:")
    for name, mb in rss.items():
        print(f"  {name:10} {mb:6.1f} MB")
    print(f"  total      {sum(rss.values()):6.1f} MB")


if __name__ == "__main__":
    main()
