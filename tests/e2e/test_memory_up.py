"""Memory under `wintermute up`: real processes, the embedded server's per-actor NATS users and
the CLI's own `cli` user. A fact saved in the owner's chat is found by `wintermute memory
search` with other words, exported, forgotten, imported back; `status` names the search mode."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_up import (  # noqa: F401 - fake_openai is a fixture
    all_healthy,
    fake_openai,
    start_up,
    stop_up,
    wait_for,
    wm,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory,
            request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    model_url = request.getfixturevalue("fake_openai")  # the scripted model of test_up.py
    home = tmp_path_factory.mktemp("memory-home")
    # learn from a conversation 2 s after it goes quiet (`up` keeps an existing config.toml)
    (home / "config.toml").write_text("[observer]\nidle_secs = 2\n")
    inst = start_up(home, model_url)
    try:
        wait_for(lambda: all_healthy(inst["env"]), 150)  # a loaded machine: slow, not hung
        yield inst["env"]
    finally:
        stop_up(inst)


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


def test_a_failed_tool_call_becomes_a_lesson_for_agents_md_through_the_gate(
    running: dict[str, str],
) -> None:
    """observer (reflection) -> llm -> observer -> executor (cmd.executor.propose, wm_state
    gate.*), then the CLI's home.command: apply, history, revert."""
    env = running
    said = wm(env, "chat", "--once", "run: ls /no-such-folder-here", "--timeout", "60")
    assert said.returncode == 0, said.stderr

    def proposed() -> str:
        out = wm(env, "memory", "changes")
        return out.stdout if "observer:reflection" in out.stdout else ""

    change = wait_for(proposed, 90, interval=1.0).split()[0]
    applied = wm(env, "memory", "apply", change)
    assert applied.returncode == 0 and "Applied change" in applied.stdout, applied.stderr
    home = Path(env["WINTERMUTE_HOME"])
    assert "When execute_command fails" in (home / "AGENTS.md").read_text()
    history = wm(env, "memory", "history")
    assert history.returncode == 0 and f"(change {change}, by observer:reflection)" in history.stdout
    undone = wm(env, "memory", "revert")
    assert undone.returncode == 0 and "Reverted version" in undone.stdout, undone.stderr
    assert "When execute_command fails" not in (home / "AGENTS.md").read_text()


def test_dreaming_rewords_duplicates_with_the_model_through_its_own_permissions(
    running: dict[str, str], tmp_path: Path,
) -> None:
    """memory -> llm (cmd.llm.complete, role memory, purpose dreaming) -> memory (its
    memory-dreaming durable): the model comes from OPENAI_BASE_URL, as the llm finds it."""
    env = running
    dupes = tmp_path / "dupes.jsonl"
    dupes.write_text("".join(json.dumps({"id": f"sail-{i}", "content": text, "scope": "global",
                                         "confidence": 0.9}) + "\n"
                             for i, text in enumerate(("Sails every Sunday",
                                                       "sails every sunday!"))))
    assert wm(env, "memory", "import", str(dupes)).returncode == 0
    dreamt = wm(env, "memory", "dream")
    assert dreamt.returncode == 0 and "reworded 1 of 1" in dreamt.stdout, dreamt.stdout
    listed = json.loads(wm(env, "memory", "list", "--json", "--scope", "global").stdout)
    assert [r["content"] for r in listed] == ["Reworded: sails every sunday."]
