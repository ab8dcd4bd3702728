"""Flatline's rules against a real nats-server: quarantine, release, revert proposals, scheduled
tasks, dead-letter summaries and budget alerts. Counts live in KV, so a new Flatline (a
restarted supervisor) carries on where the old one stopped."""

from __future__ import annotations

import asyncio
import calendar
import json
import time
from pathlib import Path
from typing import Any

from bus import Bus
from contracts import (
    ApprovalResolved,
    DeadLetter,
    HoldRelease,
    ScriptsReverted,
    Sink,
    TaskOutcome,
    ToolOutcome,
    short_hash,
)
from contracts.config import Settings
from contracts.records import ToolHold
from kit.safegit import run_git
from state import budget
from state.holds import enable_task, release_tool, task_status, tool_status
from supervisor.flatline.policy import Flatline
from supervisor.process.announce import Announcer


def flatline(settings: Settings, bus: Bus) -> Flatline:
    return Flatline(settings, bus, Announcer(settings, bus))


def outcome(tool: str, i: int, ok: bool = False, timed_out: bool = False,
            ts: float | None = None) -> ToolOutcome:
    return ToolOutcome(id=f"{tool}:{i}", tool=tool, ok=ok, duration_ms=5, timed_out=timed_out,
                       error="" if ok else "Traceback ...\nexit code 7", ts=ts or time.time())


async def stream(bus: Bus, name: str) -> list[dict[str, Any]]:
    info = await bus.js.stream_info(name)
    out = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        if info.state.messages:
            out.append(json.loads((await bus.js.get_msg(name, seq)).data or b"{}"))
    return out


async def notices(bus: Bus) -> list[str]:
    return [p["text"] for p in await stream(bus, bus.subjects.stream_out) if p["type"] == "notice"]


async def feed(fl: Flatline, tool: str, oks: list[bool], start: int = 0, **kw: Any) -> None:
    for i, ok in enumerate(oks):
        await fl.on_tool_outcome(outcome(tool, start + i, ok, **kw))


async def hold(bus: Bus, tool: str) -> ToolHold:
    """The tool's hold record; a test failure when the supervisor never wrote one."""
    record = await tool_status(bus, tool)
    assert record is not None, f"no hold record for {tool}"
    return record


async def test_consecutive_failures_quarantine_and_release_starts_afresh(
    bus: Bus, settings_for: Any
) -> None:
    fl = flatline(settings_for(), bus)
    await feed(fl, "news", [False] * 4)
    assert await tool_status(bus, "news") is None
    await feed(fl, "news", [False], start=4)
    status = await tool_status(bus, "news")
    assert status and status.status == "quarantined"
    assert "failed 5 times in a row" in status.reason and "exit code 7" in status.reason
    assert any("I quarantined the tool news" in n and "wintermute tools release news" in n
               for n in await notices(bus))
    events = [p for p in await stream(bus, bus.subjects.stream_evt)
              if p["type"] == "flatline.intervention" and p["kind"] == "quarantine"]
    assert events and events[0]["evidence"]["consecutive_failures"] == 5 and events[0]["undo"]
    assert events[0]["reason"].startswith("It failed 5 times")  # not "It it failed"

    assert "Released the tool news" in await release_tool(bus, "news", "owner")
    assert "not quarantined" in await release_tool(bus, "news", "owner")
    await feed(fl, "news", [False] * 4, start=5)  # the old five no longer count
    assert (await hold(bus, "news")).status == "active"
    await feed(fl, "news", [False], start=9)
    assert (await hold(bus, "news")).status == "quarantined"


async def test_failure_rate_and_timeouts_in_the_window(bus: Bus, settings_for: Any) -> None:
    fl = flatline(settings_for(), bus)
    await feed(fl, "flaky", [True, False] * 4)
    assert await tool_status(bus, "flaky") is None  # 8 calls: under the 10-call minimum
    await feed(fl, "flaky", [True, False], start=8)
    status = await hold(bus, "flaky")
    assert status.rule == "failure_rate" and "5 of its last 10 calls failed" in status.reason

    for i in range(3):
        await fl.on_tool_outcome(outcome("slowpoke", 2 * i, ok=True))
        await fl.on_tool_outcome(outcome("slowpoke", 2 * i + 1, timed_out=True))
    status = await hold(bus, "slowpoke")
    assert status.rule == "timeouts" and "timed out 3 times" in status.reason


async def test_a_release_command_from_the_chat_is_applied_for_the_owner_only(
    bus: Bus, settings_for: Any
) -> None:
    fl = flatline(settings_for(), bus)
    await feed(fl, "chatty", [False] * 5)
    assert (await hold(bus, "chatty")).status == "quarantined"
    task = asyncio.create_task(fl.run())
    subject = bus.subjects.cmd("supervisor", "release")
    chat = Sink(channel="telegram", chat="42")
    try:
        await bus.publish(subject, HoldRelease(id="in:1:release", name="chatty",
                                               principal="telegram:99", is_owner=False,
                                               reply_to=chat))
        await bus.publish(subject, HoldRelease(id="in:2:release", name="chatty",
                                               principal="terminal:owner", is_owner=True,
                                               reply_to=chat))
        async with asyncio.timeout(20):
            while True:  # the quarantine notice, then one answer per command
                if len([n for n in await notices(bus) if "chatty" in n]) >= 3:
                    break
                await asyncio.sleep(0.2)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert (await hold(bus, "chatty")).status == "active"
    said = [p for p in await stream(bus, bus.subjects.stream_out)
            if p["type"] == "notice" and p["id"].startswith("in:")]
    assert [p["sink"]["chat"] for p in said] == ["42", "42"]  # back to the chat that asked
    assert "Only the owner can release chatty" in said[0]["text"]
    assert "Released the tool chatty" in said[1]["text"]
    events = [p for p in await stream(bus, bus.subjects.stream_evt)
              if p["type"] == "flatline.intervention" and p["kind"] == "release"]
    assert events and events[0]["evidence"]["by"] == "terminal:owner (/tools release)"
    from supervisor.cli.audit import read_audit  # both answers are in the audit log

    audit = [(e.decision, e.outcome, e.principal) for e in await read_audit(bus)]
    assert audit == [("holds.release_tool", "refused", "telegram:99"),
                     ("holds.release_tool", "allowed", "terminal:owner")]


async def test_exempt_tools_and_duplicate_outcomes_are_not_counted(
    bus: Bus, settings_for: Any
) -> None:
    fl = flatline(settings_for(), bus)
    await feed(fl, "execute_command", [False] * 8)  # a failing shell command is not a broken tool
    assert await tool_status(bus, "execute_command") is None
    for _ in range(6):
        await fl.on_tool_outcome(outcome("dup", 1))  # the same outcome redelivered
    assert await tool_status(bus, "dup") is None


async def test_policy_refusals_do_not_quarantine_a_tool(bus: Bus, settings_for: Any) -> None:
    """Refused URLs (SSRF filter, blocked domains, rate limits) are the policy working."""
    fl = flatline(settings_for(), bus)
    for i in range(10):
        refused = ToolOutcome(id=f"web_fetch:{i}", tool="web_fetch", ok=False, duration_ms=1,
                              error="Refused 127.0.0.1: it names this machine", refused=True)
        await fl.on_tool_outcome(refused)
    assert await tool_status(bus, "web_fetch") is None
    await feed(fl, "web_fetch", [False] * 5, start=100)  # real failures still count
    assert (await hold(bus, "web_fetch")).status == "quarantined"


async def test_counts_survive_a_supervisor_restart(bus: Bus, settings_for: Any) -> None:
    settings = settings_for()
    await feed(flatline(settings, bus), "web_thing", [False] * 3)
    await feed(flatline(settings, bus), "web_thing", [False] * 2, start=3)
    assert (await hold(bus, "web_thing")).status == "quarantined"


async def test_outcomes_from_the_bus_reach_the_rules(bus: Bus, settings_for: Any) -> None:
    fl = flatline(settings_for(), bus)
    task = asyncio.create_task(fl.run())
    try:
        for i in range(5):
            out = outcome("busy_tool", i)
            await bus.publish(bus.subjects.evt("tool", "outcome", out.tool), out)
        async with asyncio.timeout(20):
            while True:
                held = await tool_status(bus, "busy_tool")
                if held is not None and held.status == "quarantined":
                    break
                await asyncio.sleep(0.2)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def git(repo: Path, *args: str) -> str:
    return run_git(repo, *args)[1]


def commit_tool(home: Path, name: str, body: str) -> str:
    scripts = home / "scripts"
    (scripts / f"{name}.py").write_text(body)
    (scripts / f"{name}.json").write_text(json.dumps({"name": name, "description": "d"}))
    git(scripts, "add", ".")
    git(scripts, "commit", "-q", "-m", f"update {name}")
    return git(scripts, "rev-parse", "HEAD")


async def published(bus: Bus, subject_part: str, type_: str) -> list[dict[str, Any]]:
    return [p for p in await stream(bus, bus.subjects.stream_cmd)
            if p["type"] == type_ and subject_part in p["id"]]


async def test_a_tool_broken_by_its_last_commit_is_quarantined_and_a_revert_proposed(
    bus: Bus, settings_for: Any, home: Path
) -> None:
    fl = flatline(settings_for(), bus)
    commit_tool(home, "digest", "print('v1')\n")
    await fl.on_tool_outcome(outcome("digest", 0, ok=True, ts=time.time() - 100))
    await asyncio.sleep(1.1)  # commit times have one-second resolution
    sha = commit_tool(home, "digest", "raise SystemExit(3)\n")
    await feed(fl, "digest", [False] * 2, start=1, ts=time.time() + 1)
    status = await hold(bus, "digest")
    assert status.rule == "regression" and sha[:8] in status.reason

    request_id = f"flatline:revert:digest:{sha}"
    [request] = await published(bus, request_id, "approval.request")
    assert "Revert the last scripts commit" in request["summary"] and request["session"] == "flatline"
    await fl.on_event(ApprovalResolved(id=f"{request_id}:resolved", approval_id="abcdefgh",
                                       session="flatline", status="approved"))
    [revert] = await published(bus, request_id, "scripts.revert")
    assert revert["id"] == f"{request_id}:do" and revert["is_owner"]
    # The executor reverted it: the tool is back at its working version and released.
    await fl.on_event(ScriptsReverted(id="r1", request_id=f"{request_id}:do", ok=True, text="ok"))
    assert (await hold(bus, "digest")).status == "active"


async def test_no_revert_is_proposed_when_later_commits_followed(
    bus: Bus, settings_for: Any, home: Path
) -> None:
    fl = flatline(settings_for(), bus)
    commit_tool(home, "feed", "print('v1')\n")
    await fl.on_tool_outcome(outcome("feed", 0, ok=True, ts=time.time() - 100))
    await asyncio.sleep(1.1)
    sha = commit_tool(home, "feed", "raise SystemExit(3)\n")
    commit_tool(home, "other", "print('unrelated')\n")
    await feed(fl, "feed", [False] * 2, start=1, ts=time.time() + 1)
    assert (await hold(bus, "feed")).rule == "regression"
    assert not await published(bus, f"flatline:revert:feed:{sha}", "approval.request")
    assert any("did not propose reverting" in n for n in await notices(bus))


async def test_a_denied_revert_keeps_the_quarantine(bus: Bus, settings_for: Any) -> None:
    fl = flatline(settings_for(), bus)
    await feed(fl, "denied_tool", [False] * 5)
    await fl.on_event(ApprovalResolved(id="flatline:revert:denied_tool:abc:resolved",
                                       approval_id="x", session="flatline", status="denied"))
    assert (await hold(bus, "denied_tool")).status == "quarantined"
    assert any("was denied; the tool stays quarantined" in n for n in await notices(bus))


def task_outcome(task: str, i: int, ok: bool) -> TaskOutcome:
    return TaskOutcome(id=f"task:{task}:{i}:task", task=task, turn_id=f"task:{task}:{i}", ok=ok,
                       reason="" if ok else "The model answered with an error.")


async def test_a_task_failing_three_times_in_a_row_is_disabled_until_enabled(
    bus: Bus, settings_for: Any
) -> None:
    fl = flatline(settings_for(), bus)
    for i, ok in enumerate([False, False, True, False, False]):
        await fl.on_task_outcome(task_outcome("morning", i, ok))
    assert (await task_status(bus, "morning")).status == "enabled"  # the success reset it
    await fl.on_task_outcome(task_outcome("morning", 4, False))  # redelivered: not counted
    assert (await task_status(bus, "morning")).failures == 2
    await fl.on_task_outcome(task_outcome("morning", 5, False))
    record = await task_status(bus, "morning")
    assert record.status == "disabled" and record.failures == 3
    assert any("I disabled the scheduled task morning" in n and "wintermute tasks enable morning"
               in n for n in await notices(bus))
    assert "enabled again" in await enable_task(bus, "morning", "owner")
    assert (await task_status(bus, "morning")).status == "enabled"
    assert "not disabled" in await enable_task(bus, "morning", "owner")


async def test_a_task_skipped_for_its_budget_is_neither_failed_nor_disabled(
    bus: Bus, settings_for: Any
) -> None:
    fl = flatline(settings_for(), bus)
    await fl.on_task_outcome(task_outcome("news", 0, False))
    for i in range(1, 6):
        await fl.on_task_outcome(TaskOutcome(id=f"task:news:{i}:task", task="news",
                                             turn_id=f"task:news:{i}", ok=False, skipped=True,
                                             reason="its budget of 50 tokens"))
    record = await task_status(bus, "news")
    assert record.status == "enabled" and record.failures == 1  # the streak neither grew nor reset


async def test_dead_letters_are_summarised_once(bus: Bus, settings_for: Any) -> None:
    fl = flatline(settings_for(), bus)
    assert not await fl.digest.dead_letters()
    for i, (actor, reason) in enumerate([
        ("executor", "invalid payload: Expected `object`, got `array`"),
        ("executor", "invalid payload: Object missing required field `id`"),
        ("channel", "no adapter for the channel telegram"),
    ]):
        letter = DeadLetter(id=f"dl{i}", actor=actor, reason=reason, subject="wm.x", stream="S",
                            stream_seq=i, deliveries=1, payload="{}")
        await bus.publish(bus.subjects.dlq(actor), letter)
    assert await fl.digest.dead_letters()
    [text] = [n for n in await notices(bus) if "dead-lettered" in n]
    assert text.startswith("3 messages were dead-lettered")
    assert "2 for executor (invalid payload)" in text and "1 for channel" in text
    assert not await fl.digest.dead_letters()  # nothing new, nothing said


async def test_budget_burn_and_a_runaway_session_alert_once(bus: Bus, settings_for: Any) -> None:
    fl = flatline(settings_for(**{"WM__BUDGET__MAX_TOKENS_PER_DAY": "1000000",
                                  "WM__BUDGET__TIMEZONE": "UTC"}), bus)
    early = float(calendar.timegm(time.strptime("2030-01-02 03:00", "%Y-%m-%d %H:%M")))
    await budget.add(bus, budget.day_key(early, "UTC"), 700_000)
    for name, tokens in [("terminal:a", 1000), ("terminal:b", 2000), ("telegram:c", 400_000)]:
        await budget.add(bus, budget.session_key(name), tokens)
        await bus.kv_put(bus.subjects.kv_sessions, f"s.{short_hash(name, 32)}",
                         json.dumps({"session": name}).encode())
    sent = await fl.digest.budget_burn(now=early)
    assert len(sent) == 2
    texts = await notices(bus)
    assert any("70% of today's token budget" in t and "03:00 UTC" in t for t in texts)
    assert any("The session telegram:c has used 400,000 tokens" in t for t in texts)
    assert await fl.digest.budget_burn(now=early) == []
    late = early + 86400 + 17 * 3600  # the same use at 20:00 the next day is no alert
    await budget.add(bus, budget.day_key(late, "UTC"), 700_000)
    assert await fl.digest.budget_burn(now=late) == []


async def test_release_of_a_tool_never_quarantined_says_so(bus: Bus) -> None:
    assert "is not quarantined" in await release_tool(bus, "news", "owner")
