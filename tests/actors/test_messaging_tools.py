"""send_message and escalate through real actors: delivery to chats, files, sinks, the oracle."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from actors.executor.messaging import ORACLE_SYSTEM
from contracts.config import Settings
from tests.actors.harness import ALL, actors, chat
from tests.capability import open_templates
from tests.fakes.llm_servers import FakeLLM

SettingsFor = Callable[..., Settings]
SECRET = "msg-s3cret-Value-24680"
GUEST_TOML = ('[privacy.templates.guest]\nprincipals = ["terminal:guest"]\n'
              'tools = ["send_message"]\nsinks = ["*"]\n')


@pytest.fixture
def settings(fake: FakeLLM, settings_for: SettingsFor, home: Path) -> Settings:
    (home / ".env").write_text(f"MY_SERVICE_PASSWORD={SECRET}\n")
    return settings_for(WM__MODELS__DEFAULT="openai/test-model", WM__EXECUTOR__MODE="direct",
                        WM__MODELS__ROLES='{"oracle": "openai/oracle-model"}')


def tool_call(name: str, **arguments: object) -> str:
    return f"tool:{name} {json.dumps(arguments)}"


async def test_send_message_delivers_text_and_files_to_the_session_chat(
    settings: Settings,
) -> None:
    ws = settings.home / "workspace"
    ws.mkdir(exist_ok=True)
    (ws / "report.txt").write_text("all good\n")
    (ws / "leak.txt").write_text(f"password is {SECRET}\n")
    (ws / "env.txt").symlink_to(settings.home / ".env")  # planted by a sandboxed command
    async with actors(settings, *ALL), chat(settings) as c:
        final = await c.ask(tool_call("send_message", text="progress 50%",
                                      files=["report.txt"]))
        sent = await c.next(("reply",))
        assert sent.text == "progress 50%\n[file: report.txt]"
        assert "Sent to terminal:owner with report.txt (document)." in final
        leak = await c.ask(tool_call("send_message", text="here", files=["leak.txt"]))
        outside = await c.ask(tool_call("send_message", text="here", files=["../.env"]))
        linked = await c.ask(tool_call("send_message", text="here", files=["env.txt"]))
    assert "contains a secret" in leak and "not inside the workspace" in outside
    assert "symbolic link" in linked
    assert not c.backlog  # neither was sent


async def test_a_secret_in_a_message_waits_for_the_owner(settings: Settings) -> None:
    """The outbound gate: a known secret value in a tool's arguments holds the call."""
    async with actors(settings, *ALL), chat(settings) as c:
        held = await c.ask(tool_call("send_message", text=f"the key is {SECRET}"))
        assert "Waiting for the owner's approval" in held
        prompt = await c.next(("approval",))
        assert "carry a secret" in prompt.text and SECRET not in prompt.text
        await c.say(f"/deny {prompt.ref}")
        await c.next(("reply",))  # the turn that tells the model the owner said no
    assert not [d for d in c.backlog if "the key is" in d.text]


async def test_send_message_to_another_chat_needs_the_owner_and_is_owner_only(
    settings_for: SettingsFor, fake: FakeLLM,
) -> None:
    # The guest gets a template with send_message and every sink, so the executor's own rule
    # (only the owner's conversations send elsewhere) is what refuses; the default third-party
    # template offers no send_message at all (tests/privacy/test_templates.py).
    open_templates(settings_for().home, GUEST_TOML)
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model", WM__EXECUTOR__MODE="direct")
    async with actors(settings, *ALL), chat(settings) as owner, \
            chat(settings, "reports") as reports, chat(settings, "guest") as guest:
        held = await owner.ask(tool_call("send_message", text="weekly report",
                                         sink="terminal:reports"))
        assert "Waiting for the owner's approval" in held and not reports.backlog
        prompt = await owner.next(("approval",))
        assert "another chat (terminal:reports)" in prompt.text
        await owner.say(f"/approve {prompt.ref}")
        got = await reports.next(("reply",))
        assert got.text == "weekly report"
        refused = await guest.ask(tool_call("send_message", text="spam",
                                            sink="terminal:reports"))
        own = await guest.ask(tool_call("send_message", text="note to self"))
        assert (await guest.next(("reply",))).text == "note to self"
    assert "Only the owner" in refused and "Sent to terminal:guest" in own
    assert not reports.backlog


async def test_escalate_asks_the_oracle_and_returns_its_answer(
    settings: Settings, fake: FakeLLM,
) -> None:
    async with actors(settings, *ALL), chat(settings) as c:
        reply = await c.ask(tool_call("escalate", question="why does the cache miss?",
                                      context="tried warming it; key sk-live-123"))
    assert reply.startswith("Tool said: The oracle (openai/oracle-model) answered:")
    assert "echo: why does the cache miss?" in reply and "tried warming it" in reply
    oracle = [r for r in fake.requests if r.get("model") == "oracle-model"]
    assert len(oracle) == 1 and not oracle[0].get("tools")
    assert oracle[0]["messages"][0]["content"] == ORACLE_SYSTEM
    assert "tried warming it; key sk-live-123" in json.dumps(oracle)


async def test_escalate_without_an_oracle_says_how_to_configure_one(
    fake: FakeLLM, settings_for: SettingsFor,
) -> None:
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model", WM__EXECUTOR__MODE="direct")
    async with actors(settings, *ALL), chat(settings) as c:
        reply = await c.ask(tool_call("escalate", question="help"))
    assert "No oracle model is configured" in reply and "[models.roles]" in reply
    assert all(r.get("model") == "test-model" for r in fake.requests)
