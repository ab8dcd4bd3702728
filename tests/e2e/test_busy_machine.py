"""A machine made busy on purpose (a CPU hog per core): `up --chat` shows its progress and
answers, and no actor is killed as hung while it is only slow (issue 17, item 1)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_docs import Output, fresh_env, model_server, spawn, stop, wm

pytestmark = pytest.mark.slow

__all__ = ["model_server"]  # the fixture, shared with the README walk-through

#: No test runs longer than this, hogs included (they are also killed at the end).
HOG_SECS = 600


@pytest.fixture
def hogs() -> Iterator[list[subprocess.Popen[bytes]]]:
    """One busy loop per core, ending by itself after HOG_SECS and killed when the test ends.

    The loop is the process itself: killing a `timeout` wrapper would leave its child
    spinning for the rest of the suite."""
    loop = f"import time\nend = time.monotonic() + {HOG_SECS}\nwhile time.monotonic() < end: pass"
    procs = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(os.cpu_count() or 2)]
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()


@pytest.mark.timeout(HOG_SECS + 300)
def test_up_on_a_busy_machine_shows_progress_answers_and_kills_nobody(
    tmp_path: Path, model_server: str, hogs: list[subprocess.Popen[bytes]]
) -> None:
    env = fresh_env(tmp_path / "home", model_server)
    up = spawn(env, "up", "--chat", stdin=subprocess.PIPE)
    try:
        assert up.stdin is not None and up.stdout is not None
        chat = Output(up.stdout)
        up.stdin.write(b"are you there\n")
        up.stdin.flush()
        chat.wait_for(r"echo: are you there", HOG_SECS - 120)
        assert re.search(r"starting: (\d of 8 actors ready|waiting for the supervisor)", chat.text)
        chat.wait_for(r"ready: all 8 actors are up", 120)
        assert all(h.poll() is None for h in hogs), "the hogs ran all along"
        out = wm(env, "status", "--json", timeout=180)
        assert out.returncode == 0, out.stderr
        status = json.loads(out.stdout)
        hung = [f"{i['target']}: {i['reason']}" for i in status["interventions"]
                if i["kind"] in ("hung", "restart")]
        assert hung == [], hung
        assert {a["name"]: a["restarts"] for a in status["actors"]} == {
            a["name"]: 0 for a in status["actors"]}
        up.stdin.close()
        assert up.wait(180) == 0
    finally:
        stop(up)
