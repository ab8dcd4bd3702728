"""What an actor process holds at rest: its code, the bus and the contracts, not the heavy
libraries some of them load on first use (measured by `python -m benchmarks.startup`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from actors import ACTORS

ROOT = Path(__file__).resolve().parents[2]

# What `python -m actors NAME` does before connecting, for every actor in one interpreter.
PROBE = """
import json, sys, tempfile
from pathlib import Path
from actors.runtime import actor_class
from contracts.config import load_settings
home = Path(tempfile.mkdtemp())
(home / "agent.toml").write_text("[[scheduled_tasks]]\\nname='a'\\ncron='0 8 * * *'\\nprompt='hi'\\n")
load_settings(home, {}, cron=False)
for name in sys.argv[1:]:
    actor_class(name)
import nats.aio.client
print(json.dumps({"modules": sorted(sys.modules), "nats": nats.aio.client.__version__}))
"""

# Loaded on first use or when asked for (tracing exporters, WebSocket NATS URLs, replicas).
HEAVY = ("opentelemetry", "importlib.metadata", "croniter", "dateutil", "aiohttp", "ctypes",
         "openai", "anthropic", "ollama", "httpx", "pydantic", "lancedb", "onnxruntime")


def test_actor_code_at_rest_loads_no_heavy_library() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE, *ACTORS], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    probe = json.loads(out.stdout)
    loaded = {m for m in probe["modules"] if m.split(".")[0] in HEAVY or m in HEAVY}
    assert not loaded, f"loaded at rest: {sorted(loaded)}"
    from importlib.metadata import version

    assert probe["nats"] == version("nats-py"), "nats.py still reports its version to the server"
