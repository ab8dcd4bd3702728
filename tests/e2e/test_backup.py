"""`wintermute backup` then `restore` into an empty home: the agent comes back whole.

Memories, agent-created tools with their git history, config and prompt files and the stream
history are back, the restored history is not handled again, and the agent answers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.safegit import run_git
from tests.e2e.test_up import (
    all_healthy,
    fake_openai,
    start_up,
    stop_up,
    stream_payloads,
    wait_for,
    wm,
)

pytestmark = pytest.mark.slow
__all__ = ["fake_openai"]  # the module-scoped model server fixture, shared with test_up

ADD = ("import json, sys\nargs = json.load(sys.stdin)\n"
       "json.dump({'sum': args['a'] + args['b']}, sys.stdout)\n")


def chat(env: dict[str, str], text: str) -> str:
    out = wm(env, "chat", "--once", text, "--timeout", "60", timeout=90)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def history(env: dict[str, str]) -> tuple[int, int]:
    """(messages in WM_IN, turn replies in WM_OUT)."""
    wait_for(lambda: all_healthy(env), 300)
    replies = [p for p in stream_payloads(env, "WM_OUT") if p.get("type") == "turn.reply"]
    return len(stream_payloads(env, "WM_IN")), len(replies)


def test_backup_then_restore_into_an_empty_home(
    tmp_path_factory: pytest.TempPathFactory, fake_openai: str,
) -> None:
    first = start_up(tmp_path_factory.mktemp("backup-src"), fake_openai)
    try:
        env = first["env"]
        wait_for(lambda: all_healthy(env), 300)
        (first["home"] / "AGENTS.md").write_text("# AGENTS.md\n\n- restored lesson 7\n")
        chat(env, "remember: my car is a red Volvo")
        create = {"name": "add_two", "description": "add_two: adds two integers.",
                  "parameters_schema": {"type": "object", "properties": {
                      "a": {"type": "integer"}, "b": {"type": "integer"}}},
                  "implementation": ADD}
        assert "add_two" in chat(env, "tool:create_tool " + json.dumps(create))
        assert '"sum": 5' in chat(env, 'tool:add_two {"a": 2, "b": 3}')
        before = history(env)
        assert wm(env, "memory", "history").returncode == 0  # data/home.git exists now
        out = wm(env, "backup", "--keep", "3", timeout=120)
        assert out.returncode == 0, out.stderr
        archive = Path(out.stdout.split("Backed up to ", 1)[1].split(" (", 1)[0])
        assert archive.exists() and oct(archive.stat().st_mode & 0o777) == "0o600"
    finally:
        stop_up(first)

    target = tmp_path_factory.mktemp("backup-dst")
    env2 = {**env, "WINTERMUTE_HOME": str(target)}
    out = wm(env2, "restore", str(archive), timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (target / "AGENTS.md").read_text().endswith("- restored lesson 7\n")
    log = run_git(target / "scripts", "log", "--format=%s")[1]  # history in data/scripts.git
    assert "add_two" in log
    versions = run_git(target, "log", "--format=%s", gdir=target / "data" / "home.git")[1]
    assert versions == "track the files as they were"  # the WriteGate's history came back
    assert run_git(target, "status", "--porcelain", "--", "USER.md",
                   gdir=target / "data" / "home.git")[1] == ""  # and matches the files

    second = start_up(target, fake_openai)
    try:
        env2 = second["env"]
        # The history is back, and none of it was handled again (no new replies for old turns).
        assert history(env2) == before
        assert "red Volvo" in chat(env2, "recall: car")
        assert '"sum": 9' in chat(env2, 'tool:add_two {"a": 4, "b": 5}')
        assert chat(env2, "hello again") == "echo: hello again"
        # Three new turns, three new replies: the restored ones were never answered again.
        assert history(env2) == (before[0] + 3, before[1] + 3)
    finally:
        stop_up(second)
