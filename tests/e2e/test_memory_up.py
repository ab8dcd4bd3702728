"""Memory under `wintermute up`: real processes, the embedded server's per-actor NATS users and
the CLI's own `cli` user. A fact saved in the owner's chat is found by `wintermute memory
search` with other words, exported, forgotten, imported back; `status` names the search mode."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_up import ROOT, fake_openai, wait_for, wm  # noqa: F401 - fixture

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory,
            request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    model_url = request.getfixturevalue("fake_openai")  # the scripted model of test_up.py
    home = tmp_path_factory.mktemp("memory-home")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WM__", "OPENAI_", "ANTHROPIC_", "OLLAMA_"))}
    env.update({
        "WINTERMUTE_HOME": str(home), "OPENAI_BASE_URL": model_url,
        "WM__MODELS__DEFAULT": "openai/test-model", "PYTHONUNBUFFERED": "1",
        "WM__OBSERVER__IDLE_SECS": "2",  # learn from a conversation 2 s after it goes quiet
    })
    log = (home / "up.log").open("w")  # kept with the home for a failed run
    proc = subprocess.Popen([sys.executable, "-m", "supervisor.cli.main", "up"], env=env,
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        yield from _healthy(env)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _healthy(env: dict[str, str]) -> Iterator[dict[str, str]]:
    wait_for(lambda: (Path(env["WINTERMUTE_HOME"]) / "data" / "runtime.json").exists(), 30)

    def healthy() -> bool:
        out = wm(env, "status", "--json")
        actors = json.loads(out.stdout)["actors"] if out.returncode == 0 else []
        return len(actors) == 8 and all(a["healthy"] for a in actors)

    wait_for(healthy, 150)  # a shared, loaded machine: slow is not hung
    yield env


def test_memory_cli_through_the_running_instance(running: dict[str, str], tmp_path: Path) -> None:
    env = running
    saved = wm(env, "chat", "--once", "remember: the car is a red Volvo", "--timeout", "60")
    assert saved.returncode == 0 and "Saved as memory" in saved.stdout, saved.stderr
    found = wm(env, "memory", "search", "automobile")
    assert found.returncode == 0 and "red Volvo" in found.stdout and "user:owner" in found.stdout
    listed = json.loads(wm(env, "memory", "list", "--json").stdout)
    assert [r["content"] for r in listed] == ["the car is a red Volvo"]
    backup = tmp_path / "memories.jsonl"
    assert wm(env, "memory", "export", "-o", str(backup)).returncode == 0
    assert json.loads(backup.read_text().splitlines()[0])["scope"] == "user:owner"
    forgot = wm(env, "memory", "forget", listed[0]["id"])
    assert forgot.returncode == 0 and "Forgot" in forgot.stdout
    assert "red Volvo" not in wm(env, "memory", "search", "automobile").stdout
    restored = wm(env, "memory", "import", str(backup), "--scope", "global")
    assert restored.returncode == 0 and "Already there: 1" in restored.stdout  # same id
    text = wm(env, "status").stdout
    assert "memory: 0 memories, hybrid (local/minilm) search" in text, text


def test_the_observer_learns_through_its_own_permissions(running: dict[str, str]) -> None:
    """observer -> llm (cmd.llm.complete) -> observer -> memory (cmd.memory.propose)."""
    env = running
    said = wm(env, "chat", "--once", "my boat is called Ariel", "--timeout", "60")
    assert said.returncode == 0, said.stderr

    def learned() -> list[dict[str, Any]]:
        out = wm(env, "memory", "list", "--json")
        rows = json.loads(out.stdout) if out.returncode == 0 else []
        return [r for r in rows if "Ariel" in r["content"]]

    rows = wait_for(learned, 60, interval=1.0)
    assert rows[0]["scope"] == "user:owner" and rows[0]["source"].startswith("observer:idle:")
