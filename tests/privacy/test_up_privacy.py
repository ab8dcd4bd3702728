"""The privacy slice under `wintermute up`: real processes, the embedded server with one NATS
user per actor (so the audit and webhook grants are the real ones), the CLI as `cli`.

A signed webhook delivery becomes a turn replying to the configured terminal sink; a replay
is refused; `wintermute audit --json` (as the `cli` user) lists both; `status --json` shows the
llm actor's breakers; the owner's own chat answers as before.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.channel.webhook import sign
from tests.e2e.test_up import (
    all_healthy,
    fake_openai,
    free_port,
    start_up,
    status,
    stop_up,
    stream_payloads,
    wait_for,
    wm,
)

__all__ = ["fake_openai"]  # the module-scoped model server fixture, shared with test_up
pytestmark = pytest.mark.slow
SECRET = "whsec-e2e-51c0ffee"


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory, fake_openai: str) -> Iterator[dict[str, Any]]:
    home: Path = tmp_path_factory.mktemp("privacy-home")
    port = free_port()
    (home / "config.toml").write_text(
        f'[channels.webhook]\nenabled = true\nport = {port}\nsink = "terminal:owner"\n')
    (home / ".env").write_text(f"WINTERMUTE_WEBHOOK_SECRET={SECRET}\n")
    inst = start_up(home, fake_openai)
    inst["hook"] = f"http://127.0.0.1:{port}/hooks"
    try:
        wait_for(lambda: all_healthy(inst["env"]), 120)
        yield inst
    finally:
        stop_up(inst)


def deliver(url: str, text: str, delivery: str) -> int:
    body = json.dumps({"text": text}).encode()
    ts = str(int(time.time()))
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "X-Wintermute-Timestamp": ts,
        "X-Wintermute-Signature": sign(SECRET, ts, body), "X-Wintermute-Delivery": delivery})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_webhook_turn_replay_audit_and_status_under_up(up: dict[str, Any]) -> None:
    env = up["env"]
    assert deliver(up["hook"] + "/ci", "deploy 7 finished", "e2e-1") == 202
    replies = wait_for(lambda: [p for p in stream_payloads(env, "WM_OUT")
                                if p["type"] == "turn.reply" and "deploy 7" in p["text"]], 60)
    assert replies[0]["sink"] == {"channel": "terminal", "chat": "owner", "thread": ""}
    assert deliver(up["hook"] + "/ci", "deploy 7 finished", "e2e-1") == 409
    out = wm(env, "audit", "--json")
    assert out.returncode == 0, out.stderr
    decisions = [(e["decision"], e["outcome"]) for e in json.loads(out.stdout)]
    assert ("webhook.accepted", "allowed") in decisions
    assert ("webhook.refused", "refused") in decisions
    llm = next(a for a in status(env)["actors"] if a["name"] == "llm")
    assert llm["info"]["breakers"] == {"openai": {"state": "closed", "recent_failures": 0}}
    assert "circuit" not in wm(env, "status").stdout  # only open breakers are listed
    chat = wm(env, "chat", "--once", "hello owner", "--timeout", "30")
    assert chat.returncode == 0 and chat.stdout.strip() == "echo: hello owner"
