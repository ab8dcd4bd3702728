"""`wintermute replay` against a live `wintermute up`: the real `cli` NATS user, the heartbeat
rewriting IDENTITY.md between turns, an approval and its continuation, a kill -9 mid-turn."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_up import ROOT, fake_openai, pid_of, wait_for, wm

__all__ = ["fake_openai"]  # the fake model server fixture, shared with test_up.py

pytestmark = pytest.mark.slow

SESSION = "terminal:owner"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, fake_openai: str) -> Iterator[dict[str, Any]]:
    home = tmp_path_factory.mktemp("replay-home")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WM__", "OPENAI_", "ANTHROPIC_", "OLLAMA_"))}
    env.update({
        "WINTERMUTE_HOME": str(home), "OPENAI_BASE_URL": fake_openai,
        "WM__MODELS__DEFAULT": "openai/test-model", "WM__EXECUTOR__MODE": "direct",
        "PYTHONUNBUFFERED": "1",
    })
    log = (home.parent / "replay-up.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "supervisor.cli.main", "up"], env=env,
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        wait_for(lambda: (home / "data" / "runtime.json").exists(), 30)
        wait_for(lambda: healthy(env), 90, 0.5)
        yield {"env": env, "home": home}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def healthy(env: dict[str, str]) -> bool:
    """All eight actors healthy; False (not an error) while NATS is still starting."""
    out = wm(env, "status", "--json")
    if out.returncode != 0:
        return False
    actors = json.loads(out.stdout)["actors"]
    return len(actors) == 8 and all(a["healthy"] for a in actors)


def turns(env: dict[str, str]) -> list[dict[str, Any]]:
    out = wm(env, "replay", "--list", "--session", SESSION, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def sleeping(cmdline: bytes) -> bool:
    """Whether a process with exactly this command line runs (PID namespaces nest: the host
    sees the sandbox's processes too)."""
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if proc.name.isdigit() and (proc / "cmdline").read_bytes() == cmdline:
                return True
    return False


def test_a_recorded_session_reruns_same_gates_a_prompt_change_exports_and_forks(
    live: dict[str, Any], tmp_path: Path
) -> None:
    env, home = live["env"], live["home"]
    (home / "workspace" / "doomed").mkdir(parents=True, exist_ok=True)
    assert wm(env, "chat", "--once", "hello replay").stdout.strip() == "echo: hello replay"
    assert "replayed" in wm(env, "chat", "--once", "run: echo replayed").stdout
    asked = wm(env, "chat", "--once", "run: rm -rf doomed && echo removed-it")
    approval = re.search(r"Approval needed \[(\w{8})\]", asked.stdout)
    assert approval, asked.stdout
    assert wm(env, "approve", approval.group(1)).returncode == 0
    wait_for(lambda: len(t := turns(env)) == 4 and t[3]["outcome"] == "replied", 60, 1.0)
    assert not (home / "workspace" / "doomed").exists()

    # kill -9 the executor while it runs a command: the request is delivered again.
    text = "run: sleep 4.25; echo slept"
    old = wait_for(lambda: pid_of(env, "executor"), 30)
    chat = subprocess.Popen(
        [sys.executable, "-m", "supervisor.cli.main", "chat", "--once", text, "--timeout", "90"],
        env=env, cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # the command runs (its sleep is a process, sandboxed or not): kill the executor then,
    # long before the 4 s are over, however slow the machine was to get there
    wait_for(lambda: sleeping(b"sleep\x004.25\x00"), 60, 0.05)
    os.kill(old, signal.SIGKILL)
    out, err = chat.communicate(timeout=90)
    assert chat.returncode == 0, err
    killed = next(t for t in turns(env) if t["text"] == text)
    shown = wm(env, "replay", killed["turn"])
    assert shown.returncode == 0, shown.stderr
    assert "!! SUPERVISOR restart executor" in shown.stdout, shown.stdout
    assert "handled again: executor restarted" in shown.stdout, shown.stdout

    # Unchanged system (the heartbeat has rewritten IDENTITY.md meanwhile): all same, exit 0.
    rerun = wm(env, "replay", "--session", SESSION, "--rerun", "--json", timeout=180)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    report = json.loads(rerun.stdout)
    assert [t["status"] for t in report["turns"]] == ["same"] * 5
    assert [t["kind"] for t in report["turns"]].count("continuation") == 1

    # A changed AGENTS.md: DIFFERENT with the diff, exit 1.
    original = (home / "AGENTS.md").read_text()
    (home / "AGENTS.md").write_text(original + "Always answer like a pirate.\n")
    changed = wm(env, "replay", "--session", SESSION, "--rerun", timeout=180)
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert "DIFFERENT" in changed.stdout and "+Always answer like a pirate." in changed.stdout
    (home / "AGENTS.md").write_text(original)

    # Export, then replay the file.
    exported = wm(env, "replay", "--export", SESSION)
    assert exported.returncode == 0, exported.stderr
    path = tmp_path / "session.jsonl"
    path.write_text(exported.stdout)
    again = wm(env, "replay", "--import", str(path), "--rerun", timeout=180)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "5 same, 0 different" in again.stdout

    # Fork at the second turn as the cli user; the original session keeps its five turns.
    second = turns(env)[1]["turn"]
    forked = wm(env, "replay", "--fork-at", second, "--say", "hello fork", "--json")
    assert forked.returncode == 0, forked.stdout + forked.stderr
    fork = json.loads(forked.stdout)
    assert "replayed" in fork["reply"] and fork["turns"][1]["reply"] == "echo: hello fork"
    assert len(turns(env)) == 5
