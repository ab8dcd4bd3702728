"""The supervisor reads the route table, never actor code: loading it imports no actor module."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import pkgutil, sys, importlib
import supervisor
for mod in pkgutil.walk_packages(supervisor.__path__, "supervisor."):
    importlib.import_module(mod.name)
from supervisor.process.provision import actor_subscriptions
from contracts.config import load_settings
import os, tempfile
home = tempfile.mkdtemp()
actor_subscriptions(load_settings(__import__("pathlib").Path(home), {}))
loaded = sorted(m for m in sys.modules if m == "actors" or m.startswith("actors."))
print(",".join(loaded))
"""


def test_the_supervisor_and_cli_load_no_actor_code() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"supervisor/ imported actor modules: {out.stdout}"
