"""`wintermute replay`: show a recorded turn from JetStream history, or re-drive it through a
fresh planner, answering its model, memory and tool requests from the recording, and show
where the new run diverges (a changed prompt file, context assembly or planner logic)."""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import time
from dataclasses import dataclass, field
from typing import Any

import msgspec

from bus import Bus
from bus.codec import decode
from bus.history import read_stream
from contracts import (
    ChatMessage,
    LlmRequest,
    LlmResponse,
    Recall,
    Recalled,
    Reply,
    ToolRequest,
    ToolResult,
    TurnRequest,
    short_hash,
)
from contracts.config import Settings, load_settings


@dataclass
class RecordedTurn:
    request: TurnRequest
    events: list[tuple[str, Any]] = field(default_factory=list)  # (subject, message) in order
    recalled: Recalled | None = None
    llm_requests: dict[int, LlmRequest] = field(default_factory=dict)
    llm_responses: dict[int, LlmResponse] = field(default_factory=dict)
    tool_results: dict[str, ToolResult] = field(default_factory=dict)  # by request id
    reply: Reply | None = None


def _decode(data: bytes) -> Any:
    try:
        return decode(data)
    except msgspec.DecodeError:
        return None


async def find_turn(bus: Bus, turn_id: str = "", session: str = "") -> RecordedTurn | None:
    """The turn with this id, or the latest turn of `session`."""
    found: TurnRequest | None = None
    async for stored in read_stream(bus, bus.subjects.stream_in):
        msg = _decode(stored.data)
        if not isinstance(msg, TurnRequest):
            continue
        if (turn_id and msg.id == turn_id) or (not turn_id and msg.session == session):
            found = msg
            if turn_id:
                break
    if found is None:
        return None
    turn = RecordedTurn(request=found)
    prefix = f"{found.id}:"
    for stream in (bus.subjects.stream_cmd, bus.subjects.stream_evt, bus.subjects.stream_out):
        async for stored in read_stream(bus, stream, since=found.ts - 5):
            msg = _decode(stored.data)
            if msg is None or not msg.id.startswith(prefix):
                continue
            turn.events.append((stored.subject, msg))
            match msg:
                case Recalled():
                    turn.recalled = msg
                case LlmRequest():
                    turn.llm_requests[msg.step] = msg
                case LlmResponse():
                    turn.llm_responses[msg.step] = msg
                case ToolResult():
                    turn.tool_results[msg.id.removesuffix(":result")] = msg
                case Reply():
                    turn.reply = msg
    turn.events.sort(key=lambda e: e[1].ts)
    return turn


def timeline(turn: RecordedTurn) -> list[str]:
    """One line per recorded event, with time since the turn arrived."""
    from supervisor.cli.tap import summarize

    start = turn.request.ts
    lines = [f"+0.000s turn.request {turn.request.id} {summarize(msgspec.to_builtins(turn.request))}"]
    for subject, msg in turn.events:
        payload = msgspec.to_builtins(msg)
        lines.append(f"+{msg.ts - start:.3f}s {payload['type']:16} {subject} {summarize(payload)}")
    return lines


def _describe(m: ChatMessage) -> str:
    calls = ", ".join(f"{c.name}({msgspec.json.encode(c.arguments).decode()})" for c in m.tool_calls)
    return f"[{m.role}] {m.content}" + (f" calls {calls}" if calls else "")


def compare_requests(old: LlmRequest, new: LlmRequest) -> list[str]:
    """Differences between the recorded and the re-run model request, as readable lines."""
    diffs: list[str] = []
    if [t.name for t in old.tools] != [t.name for t in new.tools]:
        diffs.append(f"tools offered: {[t.name for t in old.tools]} -> {[t.name for t in new.tools]}")
    if len(old.messages) != len(new.messages):
        diffs.append(f"{len(old.messages)} messages -> {len(new.messages)}")
    for i, (a, b) in enumerate(zip(old.messages, new.messages, strict=False)):
        if _describe(a) != _describe(b):
            delta = [line for line in difflib.unified_diff(
                _describe(a).splitlines(), _describe(b).splitlines(), lineterm="", n=0)
                if line[:1] in "+-" and not line.startswith(("+++", "---"))]
            diffs.append(f"message {i} ({a.role}) changed: " + " | ".join(delta[:6]))
    return diffs


async def rerun(settings: Settings, bus: Bus, turn: RecordedTurn, timeout: float = 30) -> list[str]:
    """Drive a fresh planner on a scratch prefix with the recorded answers; report divergence."""
    from actors.planner.actor import PlannerActor
    from actors.planner.state import SessionState, dump
    from actors.runtime import ActorProcess
    from bus.permissions import scratch_prefix
    from supervisor.cli.client import nats_login

    # A fixed scratch prefix (NATS permissions cannot match part of a name): one re-run at a
    # time; leftovers of an interrupted one are deleted first.
    scratch = scratch_prefix(settings.config.nats.prefix)
    env = {"WM__NATS__URL": bus.url, "WM__NATS__PREFIX": scratch}
    scratch_settings = load_settings(settings.home, {**_plain_env(), **env})
    user, password = nats_login(settings)
    creds = settings.config.nats.credentials
    sbus = await Bus(bus.url, scratch, name="wintermute-replay").connect(
        credentials=creds, user=user, password=password)
    report: list[str] = []
    planner_bus = await Bus(bus.url, scratch, name="wintermute-replay-planner").connect(
        credentials=creds, user=user, password=password)
    try:
        await _drop_scratch(sbus)
        await sbus.provision()
        first = turn.llm_requests.get(0)
        if first is not None:
            history = first.messages[1:-1]
            state = SessionState(session=turn.request.session, history=list(history))
            key = f"s.{short_hash(turn.request.session, 32)}"
            await sbus.kv_put(sbus.subjects.kv_sessions, key, dump(state))
            await sbus.kv_put(sbus.subjects.kv_state, "tools", msgspec.json.encode(first.tools))
        proc = ActorProcess(PlannerActor(scratch_settings, planner_bus))
        task = asyncio.create_task(proc.run())
        try:
            report = await _answer(sbus, turn, timeout)
        finally:
            proc.request_stop()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 10)
    finally:
        await planner_bus.close()
        await _drop_scratch(sbus)
        await sbus.close()
    return report


async def _drop_scratch(sbus: Bus) -> None:
    """Delete the scratch prefix's streams and buckets (those that exist)."""
    for spec in sbus.subjects.streams():
        with contextlib.suppress(Exception):
            await sbus.delete_stream(spec.name)
    for bucket in sbus.subjects.buckets():
        with contextlib.suppress(Exception):
            await sbus.delete_bucket(bucket.name)


def _plain_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("WM__NATS__")}


async def _answer(sbus: Bus, turn: RecordedTurn, timeout: float) -> list[str]:
    s = sbus.subjects
    report: list[str] = []
    done = asyncio.Event()

    async def on_msg(raw: Any) -> None:
        msg = _decode(raw.data)
        match msg:
            case Recall():
                recalled = turn.recalled or Recalled(
                    id=f"{msg.id}:recalled", session=msg.session, turn_id=msg.turn_id)
                await sbus.send(recalled)
            case LlmRequest():
                old = turn.llm_requests.get(msg.step)
                answer = turn.llm_responses.get(msg.step)
                if old is None or answer is None:
                    report.append(f"step {msg.step}: DIVERGED - the recording has no model "
                                  "call at this step; stopping")
                    done.set()
                    return
                diffs = compare_requests(old, msg)
                report.append(f"step {msg.step} model request: "
                              + ("same" if not diffs else "DIFFERENT\n    " + "\n    ".join(diffs)))
                await sbus.send(answer)
            case ToolRequest():
                result = turn.tool_results.get(msg.id)
                if result is None:
                    report.append(f"tool call {msg.name} ({msg.id}): DIVERGED - not in the "
                                  "recording; stopping")
                    done.set()
                    return
                report.append(f"tool call {msg.name}: answered from the recording")
                await sbus.send(result)
            case Reply():
                old_text = turn.reply.text if turn.reply else None
                same = old_text == msg.text
                report.append("reply: " + ("same" if same else
                              f"DIFFERENT\n    recorded: {old_text!r}\n    rerun:    {msg.text!r}"))
                done.set()

    sub = await sbus.subscribe(f"{s.p}.>", on_msg)
    await sbus.send(turn.request)
    try:
        await asyncio.wait_for(done.wait(), timeout)
    except TimeoutError:
        report.append(f"no reply within {timeout:.0f}s: the rerun stalled")
    await sub.stop()
    return report


async def replay(settings: Settings, turn_id: str, session: str, do_rerun: bool) -> int:
    from supervisor.cli.client import connect

    bus = await connect(settings, "replay")
    try:
        turn = await find_turn(bus, turn_id, session)
        if turn is None:
            what = f"turn {turn_id}" if turn_id else f"a turn of session {session}"
            print(f"No {what} in the stream history (WM_IN keeps 30 days).")
            return 1
        print(f"Turn {turn.request.id} ({time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(turn.request.ts))}), session {turn.request.session}")
        for line in timeline(turn):
            print("  " + line)
        if do_rerun:
            print("Re-running through a fresh planner with the recorded answers:")
            for line in await rerun(settings, bus, turn):
                print("  " + line)
        return 0
    finally:
        await bus.close()
