"""Whole turns through real actors (in-process), real NATS, real SDKs against local model servers."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from contracts.config import Settings
from tests.actors.harness import ALL, actors, chat
from tests.fakes.llm_servers import FakeLLM

SettingsFor = Callable[..., Settings]


pytestmark = pytest.mark.usefixtures("clean_provider_env")


@pytest.fixture
async def fake(request: pytest.FixtureRequest) -> AsyncIterator[FakeLLM]:
    server = FakeLLM()
    await server.start(getattr(request, "param", "openai"))
    yield server
    await server.stop()


def use_model(monkeypatch: pytest.MonkeyPatch, kind: str, url: str) -> dict[str, str]:
    var = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL", "ollama": "OLLAMA_HOST"}
    monkeypatch.setenv(var[kind], url)
    return {"WM__MODELS__DEFAULT": f"{kind}/test-model"}


@pytest.mark.parametrize("fake", ["openai", "anthropic", "ollama"], indirect=True)
async def test_answer_and_tool_call_through_each_provider(
    fake: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    kind = request.node.callspec.params["fake"]
    settings = settings_for(**use_model(monkeypatch, kind, fake.url))
    async with actors(settings, *ALL), chat(settings) as c:
        assert await c.ask("hello there") == "echo: hello there"
        reply = await c.ask("run: echo tool-output-$((6*7))")
        assert "tool-output-42" in reply and "exit code 0" in reply


async def test_no_model_configured_answers_with_setup_sentence(settings_for: SettingsFor) -> None:
    settings = settings_for()
    async with actors(settings, *ALL), chat(settings) as c:
        reply = await c.ask("hi")
    assert "No language model is configured" in reply and "config.toml" in reply
    assert "OPENAI_BASE_URL" in reply and "llama.cpp" in reply  # the commonest local setup


async def test_unreachable_model_degrades_and_fallback_answers(
    fake: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # nothing listens there
    settings = settings_for(WM__MODELS__DEFAULT="anthropic/down",
                            WM__MODELS__RETRY_DEADLINE_SECS="0")  # retries: test_faults.py
    async with actors(settings, *ALL), chat(settings) as c:
        reply = await c.ask("hello")
        assert "couldn't reach any configured model" in reply and "anthropic/down" in reply
    monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
    settings = settings_for(
        WM__MODELS__DEFAULT="anthropic/down", WM__MODELS__FALLBACK='["openai/backup"]'
    )
    async with actors(settings, *ALL), chat(settings) as c:
        assert await c.ask("hello again") == "echo: hello again"


async def test_tool_calls_are_bounded_per_turn(
    fake: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(
        **use_model(monkeypatch, "openai", fake.url), WM__BUDGET__MAX_TOOL_CALLS_PER_TURN="0"
    )
    async with actors(settings, *ALL), chat(settings) as c:
        reply = await c.ask("run: touch should-not-exist")
    assert "limit of 0 tool calls" in reply
    assert not (settings.home / "workspace" / "should-not-exist").exists()
    assert fake.requests[-1].get("tools") in (None, [])  # the last call offered no tools


async def test_history_survives_a_planner_restart(
    fake: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(**use_model(monkeypatch, "openai", fake.url))
    async with actors(settings, *ALL) as running, chat(settings) as c:
        await c.ask("my favourite colour is teal")
        await running.stop("planner")
        await running.start("planner")
        await c.ask("what did I say?")
    contents = [m.get("content") for m in fake.requests[-1]["messages"]]
    assert "my favourite colour is teal" in contents
    assert "echo: my favourite colour is teal" in contents


async def test_secrets_from_env_file_never_reach_the_model(
    fake: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Direct mode (no sandbox hides .env), so the redactor is what stands in the way."""
    secret = "sup3r-s3cret-value-123456"
    (Path(settings_for().home) / ".env").write_text(f"MY_SERVICE_PASSWORD={secret}\n")
    # Reading .env itself needs approval in direct mode (shellgate); a copy of the value does not.
    (Path(settings_for().home) / "workspace" / "copy.txt").write_text(f"pw={secret}\n")
    settings = settings_for(**use_model(monkeypatch, "openai", fake.url), WM__EXECUTOR__MODE="direct")
    async with actors(settings, *ALL), chat(settings) as c:
        reply = await c.ask("run: cat copy.txt; echo $MY_SERVICE_PASSWORD")
    assert secret not in reply and "[REDACTED]" in reply
    assert secret not in json.dumps(fake.requests)


async def test_memory_saved_in_one_session_is_found_in_another(
    fake: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both terminal chats are the owner's: the owner's memories follow them everywhere."""
    owner = '["terminal:owner", "terminal:second"]'
    settings = settings_for(**use_model(monkeypatch, "openai", fake.url),
                            WM__OWNER__PRINCIPALS=owner)
    async with actors(settings, *ALL), chat(settings) as c:
        saved = await c.ask("remember: the deploy key rotates on fridays")
        assert "Saved as memory" in saved
        async with chat(settings, "second") as other:
            found = await other.ask("recall: deploy fridays")
    assert "the deploy key rotates on fridays" in found
    # and relevant memories are put into the system prompt of later turns
    system = fake.requests[-1]["messages"][0]["content"]
    assert "the deploy key rotates on fridays" in system


async def test_risky_command_waits_for_owner_approval_then_runs(
    fake: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Direct mode: risky patterns need the owner's approval when nothing is sandboxed."""
    settings = settings_for(**use_model(monkeypatch, "openai", fake.url), WM__EXECUTOR__MODE="direct")
    target = settings.home / "workspace" / "doomed"
    target.mkdir()
    async with actors(settings, *ALL), chat(settings) as c:
        first = await c.ask("run: rm -rf doomed && echo removed-it")
        assert "Waiting for the owner's approval" in first
        prompt = await c.next(("approval",))
        assert "rm -rf doomed" in prompt.text and len(prompt.ref) == 8
        assert target.exists()
        await c.say(f"/approve {prompt.ref}")
        event_reply = await c.next(("reply",))
        assert "removed-it" in event_reply.text
        assert not target.exists()
        # single use: a second answer is refused
        await c.say(f"/deny {prompt.ref}")
        notice = await c.next(("notice",))
        while "Sent" in notice.text:
            notice = await c.next(("notice",))
        assert "unknown, already used or expired" in notice.text


async def test_obfuscated_commands_wait_for_approval_in_direct_mode(
    fake: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 16: the regex gate let these through; the parsed allowlist does not."""
    settings = settings_for(**use_model(monkeypatch, "openai", fake.url), WM__EXECUTOR__MODE="direct")
    target = settings.home / "workspace" / "doomed"
    target.mkdir()
    async with actors(settings, *ALL), chat(settings) as c:
        for command in ("c=rm; $c -R doomed", "find doomed -delete", "echo rm -R doomed | bash"):
            reply = await c.ask(f"run: {command}")
            assert "Waiting for the owner's approval" in reply, (command, reply)
            await c.next(("approval",))
        listed = await c.ask("run: ls -a | grep -c doomed")
    assert target.exists() and "exit code 0" in listed


async def test_non_owner_cannot_run_commands_or_approve(
    fake: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(**use_model(monkeypatch, "openai", fake.url))
    async with actors(settings, *ALL), chat(settings, "guest") as guest:
        reply = await guest.ask("run: echo should-not-run")
    assert "should-not-run" not in reply.replace("echo should-not-run", "")
    # A guest's message reaches only the synthesizer, which has no tools: the call it writes
    # is delivered as text (tests/privacy/test_templates.py).
    assert '"name": "execute_command"' in reply


async def test_credential_guard_blocks_a_pasted_key(
    fake: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(**use_model(monkeypatch, "openai", fake.url))
    key = "sk-ant-api03-" + "A1b2C3d4" * 10
    async with actors(settings, *ALL), chat(settings) as c:
        blocked = await c.ask(key)
        redacted = await c.ask(f"please use the key {key} for the deploy script later")
    assert ".env" in blocked
    assert key not in json.dumps(fake.requests)
    assert "[REDACTED" in redacted


async def test_daily_budget_stops_model_calls(
    fake: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(
        **use_model(monkeypatch, "openai", fake.url), WM__BUDGET__MAX_TOKENS_PER_DAY="1"
    )
    async with actors(settings, *ALL), chat(settings) as c:
        assert await c.ask("first") == "echo: first"
        calls = len(fake.requests)
        reply = await c.ask("second")
    assert "Daily token budget reached" in reply and "back tomorrow" in reply
    assert len(fake.requests) == calls


async def test_scheduled_task_delivers_to_its_sink(
    fake: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(**use_model(monkeypatch, "openai", fake.url))
    (settings.home / "agent.toml").write_text(
        "[heartbeat]\ninterval_secs = 1\n[[scheduled_tasks]]\nname = 'tick'\n"
        "cron = '* * * * * *'\nprompt = 'scheduled hello'\nsink = 'terminal:reports'\n"
    )
    settings = settings_for(**use_model(monkeypatch, "openai", fake.url))
    async with chat(settings, "reports") as reports, actors(settings, *ALL, "heartbeat"):
        delivered = await reports.next(("reply",), timeout=30)
    assert delivered.text == "echo: [Scheduled task] scheduled hello"
    assert (settings.home / "health.json").exists()
    identity = (settings.home / "IDENTITY.md").read_text()
    assert "openai/test-model" in identity and "execute_command" in identity
    assert "- skills: meeting-notes, word-count" in identity  # shipped by init, read by the executor


async def test_observer_logs_events_and_announces_idle_sessions(
    fake: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(
        **use_model(monkeypatch, "openai", fake.url), WM__OBSERVER__IDLE_SECS="0.5"
    )
    async with actors(settings, *ALL, "observer") as running, chat(settings) as c:
        await c.ask("note this")
        bus = running.procs["observer"][2]
        psub = await bus.js.pull_subscribe(
            f"{bus.subjects.p}.evt.session.idle.>", stream=bus.subjects.stream_evt
        )
        idle = await psub.fetch(1, timeout=15)
    assert json.loads(idle[0].data)["session"] == "terminal:owner"
    lines = [json.loads(x) for x in (settings.home / "logs" / "events.jsonl").read_text().splitlines()]
    types = {line["type"] for line in lines}
    assert {"turn.request", "llm.request", "llm.response", "turn.reply"} <= types


async def test_every_actor_survives_garbage_on_its_inbox(
    fake: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(**use_model(monkeypatch, "openai", fake.url))
    async with actors(settings, *ALL) as running, chat(settings) as c:
        bus = running.procs["planner"][2]
        s = bus.subjects
        targets = [
            s.inbound("terminal", "owner"), s.cmd("llm", "complete"), s.cmd("executor", "run"),
            s.cmd("memory", "save"), s.cmd("approval", "request"), s.cmd("channel", "terminal"),
            s.outbound("terminal", "owner"), s.evt("tool", "result", "x"),
        ]
        for subject in targets:
            await bus.js.publish(subject, b"{garbage")
            await bus.js.publish(subject, b'{"type":"turn.request","id":1}')
        psub = await bus.js.pull_subscribe(f"{s.p}.dlq.>", stream=s.stream_dlq)
        letters: list = []
        async with asyncio.timeout(30):
            while len(letters) < 2 * len(targets):
                with contextlib.suppress(TimeoutError):
                    letters += await psub.fetch(2 * len(targets) - len(letters), timeout=2)
        assert len(letters) == 2 * len(targets)
        assert all("invalid payload" in json.loads(m.data)["reason"] for m in letters)
        assert await c.ask("still there?") == "echo: still there?"
    await asyncio.sleep(0)
