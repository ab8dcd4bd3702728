"""`wintermute replay`: recorded sessions are listed, shown, re-driven through a real planner
process on the scratch prefix, exported, imported and forked."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from actors.llm.providers import reset_clients
from bus import Bus
from bus.codec import encode
from contracts import (
    DeadLetter,
    Intervention,
    Reply,
    Sink,
    ToolRequest,
    ToolResult,
    TurnRequest,
)
from contracts.config import Settings
from state.budget import day_key, used
from supervisor.cli.replay import Options, replay
from supervisor.cli.replay.drive import Scratch
from supervisor.cli.replay.record import build, decode_entry
from supervisor.cli.replay.results import session_key
from supervisor.cli.replay.source import from_history
from supervisor.cli.replay.timeline import listing, timeline
from tests.actors.harness import ALL, Running, actors, chat
from tests.fakes.llm_servers import FakeLLM

SESSION = "terminal:owner"


@pytest.fixture
async def fake(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeLLM]:
    """A scripted OpenAI-compatible model the llm actors (in-process and spawned) talk to."""
    server = FakeLLM()
    monkeypatch.setenv("OPENAI_BASE_URL", await server.start("openai"))
    reset_clients()
    yield server
    await server.stop()


@pytest.fixture
async def recorded(
    settings_for: Callable[..., Settings], fake: FakeLLM
) -> AsyncIterator[tuple[Settings, FakeLLM, Running]]:
    """A session of four turns, one asking for approval and its continuation after it, with
    IDENTITY.md regenerated between turns as the heartbeat does; the actors keep running."""
    settings = settings_for(WM__MODELS__DEFAULT="openai/m", WM__EXECUTOR__MODE="direct")
    (settings.home / "workspace" / "doomed").mkdir()
    async with actors(settings, *ALL) as running, chat(settings) as c:
        (settings.home / "IDENTITY.md").write_text("# Wintermute\nUptime 1 minute.\n")
        assert await c.ask("hello first") == "echo: hello first"
        (settings.home / "IDENTITY.md").write_text("# Wintermute\nUptime 2 minutes.\n")
        assert "replayed" in await c.ask("run: echo replayed")
        assert "Waiting for the owner's approval" in await c.ask(
            "run: rm -rf doomed && echo removed-it")
        prompt = await c.next(("approval",))
        await c.say(f"/approve {prompt.ref}")
        assert "removed-it" in (await c.next(("reply",))).text
        (settings.home / "IDENTITY.md").write_text("# Wintermute\nUptime 9 hours.\n")
        yield settings, fake, running


async def test_list_shows_every_turn_with_outcome(
    recorded: tuple[Settings, FakeLLM, Running], bus: Bus, capsys: pytest.CaptureFixture[str]
) -> None:
    settings, _, _ = recorded
    assert await replay(settings, Options(list_turns=True, session=SESSION, as_json=True)) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["kind"] for r in rows] == ["user", "user", "user", "continuation"]
    assert [r["outcome"] for r in rows] == ["replied", "replied", "replied, approval asked",
                                            "replied"]
    assert rows[3]["turn"].startswith(rows[2]["turn"] + ":tool:0:0:approval:resolved")
    assert all(r["time"] and r["turn"] for r in rows)
    assert await replay(settings, Options(list_turns=True)) == 0
    assert "hello first" in capsys.readouterr().out


async def test_unchanged_session_reruns_same_and_a_changed_agents_md_fails(
    recorded: tuple[Settings, FakeLLM, Running], bus: Bus, capsys: pytest.CaptureFixture[str]
) -> None:
    settings, fake, _ = recorded
    calls = len(fake.requests)
    code = await replay(settings, Options(session=SESSION, rerun=True, as_json=True))
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert [t["status"] for t in report["turns"]] == ["same"] * 4
    assert report["turns"][3]["kind"] == "continuation"
    steps = [(s["what"], s["status"]) for s in report["turns"][2]["steps"]]
    assert steps == [("model request", "same"), ("tool call execute_command", "answered"),
                     ("model request", "same"), ("reply", "same")]

    (settings.home / "AGENTS.md").write_text("Always answer like a pirate.\n")
    code = await replay(settings, Options(session=SESSION, rerun=True))
    out = capsys.readouterr().out
    assert code == 1
    assert "step 0 model request: DIFFERENT" in out and "+Always answer like a pirate." in out
    assert "0 same, 4 different" in out
    assert len(fake.requests) == calls, "a replay never calls the model"
    # Nothing of the re-runs landed in the instance's own history.
    rec = await from_history(bus)
    assert len(rec.session(SESSION)) == 4


async def test_show_one_turn_and_rerun_it_alone(
    recorded: tuple[Settings, FakeLLM, Running], bus: Bus, capsys: pytest.CaptureFixture[str]
) -> None:
    settings, _, _ = recorded
    turn = (await from_history(bus)).session(SESSION)[1]
    assert await replay(settings, Options(turn_id=turn.id)) == 0
    shown = capsys.readouterr().out
    for kind in ("memory.recall", "llm.request", "tool.request", "tool.result", "turn.reply"):
        assert kind in shown
    assert await replay(settings, Options(turn_id=turn.id, rerun=True)) == 0
    assert "1 same, 0 different" in capsys.readouterr().out
    assert await replay(settings, Options(turn_id="terminal:nope")) == 2


async def test_export_import_round_trip_reruns_without_the_instance(
    recorded: tuple[Settings, FakeLLM, Running], bus: Bus, capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    settings, _, running = recorded
    assert await replay(settings, Options(export=SESSION)) == 0
    exported = tmp_path / "s.jsonl"
    exported.write_text(capsys.readouterr().out)
    lines = exported.read_text().splitlines()
    assert all(json.loads(line)["msg"]["type"] for line in lines)
    assert await replay(settings, Options(list_turns=True, as_json=True)) == 0
    live = json.loads(capsys.readouterr().out)
    assert await replay(settings, Options(list_turns=True, as_json=True,
                                          import_path=str(exported))) == 0
    assert json.loads(capsys.readouterr().out) == live

    # Another machine: no instance running, the file alone (a private nats-server is started).
    await running.stop_all()
    elsewhere = settings_without_url(settings)
    assert await replay(elsewhere, Options(import_path=str(exported), rerun=True)) == 0
    assert "4 same, 0 different" in capsys.readouterr().out

    exported.write_text(lines[0] + "\nnot json\n")
    assert await replay(elsewhere, Options(import_path=str(exported), rerun=True)) == 2
    assert "line 2" in capsys.readouterr().err


def settings_without_url(settings: Settings) -> Settings:
    import msgspec

    nats = msgspec.structs.replace(settings.config.nats, url="")
    return msgspec.structs.replace(
        settings, config=msgspec.structs.replace(settings.config, nats=nats))


async def test_fork_continues_live_and_leaves_the_original_untouched(
    recorded: tuple[Settings, FakeLLM, Running], bus: Bus, capsys: pytest.CaptureFixture[str]
) -> None:
    settings, fake, _ = recorded
    turn = (await from_history(bus)).session(SESSION)[1]
    before = await bus.kv_get(bus.subjects.kv_sessions, session_key(SESSION))
    calls = len(fake.requests)
    opts = Options(fork_at=turn.id, as_json=True, say=("hello again",))
    assert await replay(settings, opts) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["session"].startswith(SESSION + "~fork-")
    assert "replayed" in out["reply"], "the owner's rights came along"
    assert out["turns"][1]["reply"] == "echo: hello again"
    assert len(fake.requests) == calls + 3, "a fork runs live"
    # The model saw the original history before the forked turn, then the turn's input.
    seen = [m["content"] for m in fake.requests[calls]["messages"]]
    assert seen[1:] == ["hello first", "echo: hello first", "run: echo replayed"]
    later = [m["content"] for m in fake.requests[calls + 2]["messages"]]
    assert later[-1] == "hello again" and "run: rm -rf doomed && echo removed-it" not in later
    assert await bus.kv_get(bus.subjects.kv_sessions, session_key(SESSION)) == before
    rec = await from_history(bus)
    assert len(rec.session(SESSION)) == 4
    forked = rec.session(out["session"])
    assert [t.text for t in forked] == ["run: echo replayed", "hello again"]
    assert all(isinstance(t.start.msg, TurnRequest) and t.start.msg.is_owner for t in forked)
    # A fork's turn can be forked again, and re-run like any other.
    assert await replay(settings, Options(session=out["session"], rerun=True)) == 0
    capsys.readouterr()


async def test_live_model_rerun_marks_how_answers_differ(
    recorded: tuple[Settings, FakeLLM, Running], bus: Bus, capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    settings, fake, _ = recorded
    assert await replay(settings, Options(export=SESSION)) == 0
    exported = tmp_path / "s.jsonl"
    # The recorded model once answered the first turn differently.
    exported.write_text(capsys.readouterr().out.replace('"content":"echo: hello first"',
                                                        '"content":"Hi! How can I help?"'))
    calls = len(fake.requests)
    code = await replay(settings, Options(import_path=str(exported), session=SESSION,
                                          model="openai/m", as_json=True))
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["model"] == "openai/m"
    first = report["turns"][0]
    answer = next(s for s in first["steps"] if s["what"] == "model answer")
    assert answer["live"] and answer["status"] == "DIFFERENT"
    assert "'Hi! How can I help?' -> 'echo: hello first'" in answer["detail"][0]
    assert first["tokens"] > 0 and report["charged"]
    assert await used(bus, day_key()) >= report["tokens"] > 0, "charged to today's budget"
    # After a difference the next turn starts from the recorded history again: the live
    # model then answers the later turns as recorded.
    later = [s for t in report["turns"][1:] for s in t["steps"]]
    assert [t["status"] for t in report["turns"][1:]] == ["same"] * 3
    assert any(s["what"] == "model answer" and s["live"] for s in later)
    assert len(fake.requests) > calls
    assert await replay(settings, Options(session=SESSION, model="nosuchrole")) == 2


def test_timeline_shows_crashes_redeliveries_and_dead_letters() -> None:
    """A killed executor: its restart, the request handled again, a dead letter of the turn."""
    turn_id = "terminal:abc"
    sink = Sink(channel="terminal", chat="owner")
    call: dict[str, Any] = dict(session=SESSION, turn_id=turn_id, step=0, call_id="c1",
                                name="execute_command")
    msgs: list[tuple[str, str, Any]] = [
        ("WM_IN", "wm.in.terminal.owner", TurnRequest(
            id=turn_id, ts=100.0, session=SESSION, principal=SESSION, text="run: sleep 5",
            reply_to=sink, is_owner=True)),
        ("WM_CMD", "wm.cmd.executor.run", ToolRequest(
            id=f"{turn_id}:tool:0:0", ts=101.0, arguments={"command": "sleep 5"}, **call)),
        ("WM_EVT", "wm.evt.flatline.restart.executor", Intervention(
            id="flatline:restart:executor:42", ts=102.0, kind="restart", target="executor",
            action="Restarting the executor actor.", reason="It was killed (SIGKILL).")),
        ("WM_DLQ", "wm.dlq.executor", DeadLetter(
            id="dl1", ts=103.0, actor="executor", reason="failed on every delivery",
            subject="wm.cmd.executor.run", stream="WM_CMD", stream_seq=9, deliveries=4,
            payload=encode(ToolRequest(id=f"{turn_id}:tool:0:1", ts=101.0, **call)).decode())),
        ("WM_EVT", "wm.evt.tool.result.terminal_owner", ToolResult(
            id=f"{turn_id}:tool:0:0:result", ts=112.5, ok=False, output="restarted", **call)),
        ("WM_OUT", "wm.out.terminal.owner", Reply(
            id=f"{turn_id}:reply", ts=113.0, session=SESSION, turn_id=turn_id, sink=sink,
            text="The executor restarted.")),
    ]
    entries = []
    for seq, (stream, subject, msg) in enumerate(msgs, 1):
        entry = decode_entry(stream, seq, subject, {}, encode(msg))
        assert entry is not None
        entries.append(entry)
    rec = build(entries)
    [turn] = rec.turns
    lines = "\n".join(timeline(turn))
    assert "+2.000s !! SUPERVISOR restart executor: Restarting the executor actor." in lines
    assert "handled again: executor restarted at +2.000s" in lines
    assert "DEAD LETTER from executor after 4 deliveries: failed on every delivery" in lines
    assert listing(rec)[0]["incidents"] == 2


async def test_a_rerun_that_leaves_the_recording_says_where_and_fails(
    recorded: tuple[Settings, FakeLLM, Running], bus: Bus, capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """A planner asking for a tool call the recording does not have (here: the recording was
    edited) is a divergence: the re-run stops there, says so and exits 1."""
    settings, _, _ = recorded
    assert await replay(settings, Options(export=SESSION)) == 0
    exported = tmp_path / "s.jsonl"
    exported.write_text(capsys.readouterr().out.replace(
        '"arguments":{"command":"echo replayed"}}', '"arguments":{"command":"echo other"}}'))
    code = await replay(settings, Options(import_path=str(exported), rerun=True, as_json=True))
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert [t["status"] for t in report["turns"]] == ["same", "different", "same", "same"]
    diverged = report["turns"][1]["steps"][-1]
    assert diverged["status"] == "DIVERGED" and "echo replayed" in diverged["detail"][0]
    assert await replay(settings, Options(turn_id=report["turns"][1]["turn"], as_json=True,
                                          import_path=str(exported))) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["outcome"] == "replied" and shown["events"][0]["msg"]["type"] == "turn.request"


async def test_a_reset_between_turns_is_replayed_as_a_fresh_history(
    settings_for: Callable[..., Settings], fake: FakeLLM, bus: Bus,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = settings_for(WM__MODELS__DEFAULT="openai/m")
    async with actors(settings, *ALL), chat(settings) as c:
        assert await c.ask("hello one") == "echo: hello one"
        await c.say("/reset")
        await c.next(("notice",))
        assert await c.ask("hello two") == "echo: hello two"
        rec = await from_history(bus)
        assert [t.reset_before for t in rec.session(SESSION)] == [False, True]
        code = await replay(settings, Options(session=SESSION, rerun=True))
        out = capsys.readouterr().out
        assert code == 0, out
        assert "2 same, 0 different" in out
        # The reset travels in an export too.
        assert await replay(settings, Options(export=SESSION)) == 0
        exported = settings.home / "s.jsonl"
        exported.write_text(capsys.readouterr().out)
        assert '"type":"session.reset"' in exported.read_text()
        code = await replay(settings, Options(import_path=str(exported), rerun=True))
        assert code == 0, capsys.readouterr().out


async def test_a_second_rerun_at_the_same_time_is_refused(
    recorded: tuple[Settings, FakeLLM, Running], capsys: pytest.CaptureFixture[str]
) -> None:
    settings, _, _ = recorded
    login = {"user": "", "password": "", "credentials": ""}
    async with Scratch(settings, settings.config.nats.url, login):
        assert await replay(settings, Options(session=SESSION, rerun=True)) == 2
        assert "Another `wintermute replay --rerun` is using" in capsys.readouterr().err
    assert await replay(settings, Options(session=SESSION, rerun=True)) == 0
