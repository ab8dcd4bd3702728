"""Memory under `wintermute up`: real processes, the embedded server's per-actor NATS users and
the CLI's own `cli` user. A fact saved in the owner's chat is found by `wintermute memory
search` with other words, exported, forgotten, imported back; `status` names the search mode."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_up import fake_openai, wait_for, wm  # noqa: F401 - fixture
from tests.e2e.test_up import up as _up

pytestmark = pytest.mark.slow
up = _up  # the same `wintermute up` fixture, one instance for this module


@pytest.fixture(scope="module")
def running(up: dict[str, Any]) -> Iterator[dict[str, str]]:
    env: dict[str, str] = up["env"]
    wait_for(lambda: (Path(env["WINTERMUTE_HOME"]) / "data" / "runtime.json").exists(), 30)

    def healthy() -> bool:
        out = wm(env, "status", "--json")
        actors = json.loads(out.stdout)["actors"] if out.returncode == 0 else []
        return len(actors) == 8 and all(a["healthy"] for a in actors)

    wait_for(healthy, 90)
    yield env


def test_memory_cli_through_the_running_instance(running: dict[str, str], tmp_path: Path) -> None:
    env = running
    saved = wm(env, "chat", "--once", "remember: my car is a red Volvo", "--timeout", "60")
    assert saved.returncode == 0 and "Saved as memory" in saved.stdout, saved.stderr
    found = wm(env, "memory", "search", "automobile")
    assert found.returncode == 0 and "red Volvo" in found.stdout and "user:owner" in found.stdout
    listed = json.loads(wm(env, "memory", "list", "--json").stdout)
    assert [r["content"] for r in listed] == ["my car is a red Volvo"]
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
