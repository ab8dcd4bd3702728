"""The WriteGate for AGENTS.md and USER.md: proposed, approved through the approval actor (or by
policy), committed in data/home.git, revertible; malformed proposals dead-lettered. Real
executor and approval actors on the real nats-server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from actors.executor.home_gate import TOOL, hint
from bus import Bus
from contracts import (
    ApprovalDecision,
    HomeAnswer,
    HomeCommand,
    HomeEditPropose,
    Sink,
    ToolRequest,
    ToolResult,
    TurnRequest,
    short_hash,
)
from contracts.config import Settings
from kit.safegit import run_git
from supervisor.cli.memory_files import ask
from tests.actors.harness import ALL, actors, chat
from tests.capability import signed
from tests.fakes.llm_servers import FakeLLM

SettingsFor = Callable[..., Settings]
LESSON = "- Check the disk is mounted before backing up to it."


async def stored(bus: Bus, stream: str) -> list[dict[str, Any]]:
    info = await bus.js.stream_info(stream)
    out: list[dict[str, Any]] = []
    if info.state.messages:
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            with contextlib.suppress(Exception):
                out.append(json.loads((await bus.js.get_msg(stream, seq)).data))
    return out


async def until(check: Callable[[], Awaitable[Any]], timeout: float = 30) -> Any:
    """Poll `check` until it returns something true (a generous deadline, not a fixed sleep)."""
    async with asyncio.timeout(timeout):
        while True:
            if value := await check():
                return value
            await asyncio.sleep(0.2)


def propose(n: int, *, is_owner: bool = True, **fields: Any) -> HomeEditPropose:
    base: dict[str, Any] = {"path": "AGENTS.md", "append": LESSON, "reason": "a failed backup",
                            "by": "observer:reflection"}
    return HomeEditPropose(id=f"idle:s:{n}:reflect:propose", session="terminal:owner",
                           principal="terminal:owner", is_owner=is_owner, **{**base, **fields})


async def answer(settings: Settings, action: str, arg: str = "") -> HomeAnswer:
    """A HomeCommand as `wintermute memory history|revert|...` sends it, and its answer."""
    cmd = HomeCommand(id=f"cli:{uuid.uuid4().hex}", action=action, arg=arg, principal="cli",
                      is_owner=True)
    return await ask(settings, cmd, 60)


def log(home: Path) -> list[str]:
    _, out = run_git(home, "log", "--format=%s", gdir=home / "data" / "home.git")
    return out.splitlines()


async def test_a_suggested_change_waits_for_the_owner_then_applies_and_reverts(
    settings_for: SettingsFor, bus: Bus,
) -> None:
    settings = settings_for()
    agents = settings.home / "AGENTS.md"
    before = agents.read_text()
    async with actors(settings, "executor", "approval"):
        await bus.send(propose(1))
        await bus.send(propose(1))  # redelivered: one proposal, one prompt

        async def prompts() -> list[dict[str, Any]]:
            return [p for p in await stored(bus, bus.subjects.stream_out)
                    if p["type"] == "approval.prompt"]

        prompt = (await until(prompts, 60))[0]
        assert agents.read_text() == before  # nothing before the owner says yes
        assert "+" + LESSON in prompt["summary"] and "a failed backup" in prompt["summary"]
        pending = await answer(settings, "pending")
        assert "observer:reflection" in pending.text
        decision = ApprovalDecision(id="tg:1:decision", approval_id=prompt["approval_id"],
                                    approved=True, principal="terminal:owner", is_owner=True)
        await bus.send(decision)

        async def applied() -> bool:
            return agents.read_text() == before + LESSON + "\n"

        await until(applied, 60)

        async def versions() -> list[str]:  # the commit follows the write
            return [line for line in (await answer(settings, "history")).text.splitlines()[1:]
                    if "AGENTS.md: a failed backup" in line]

        version = (await until(versions, 60))[0].split()[0]
        reverted = await answer(settings, "revert", version)
        again = await answer(settings, "revert", "zzzz")
        audit = [(e["decision"], e["outcome"]) for e in
                 await until(lambda: stored(bus, bus.subjects.stream_audit), 10)
                 if e["actor"] == "executor"]
        assert len(await prompts()) == 1
    assert reverted.ok and f"Reverted version {version}" in reverted.text
    assert agents.read_text() == before
    assert not again.ok and "not a version" in again.text
    assert log(settings.home) == [f"revert {version}: AGENTS.md: a failed backup (change "
                                  f"{short_hash(propose(1).id, 8)}, by observer:reflection)",
                                  log(settings.home)[1], "track the files as they were"]
    assert ("gate.proposed", "asked") in audit and ("gate.applied", "approved") in audit
    assert ("gate.reverted", "allowed") in audit


async def test_policy_auto_applies_the_owners_changes_off_refuses_and_junk_is_dead_lettered(
    settings_for: SettingsFor, bus: Bus,
) -> None:
    settings = settings_for(WM__MEMORY__AGENTS_MD="auto", WM__MEMORY__USER_MD="off")
    home = settings.home
    before = (home / "USER.md").read_text()
    async with actors(settings, "executor", "approval"):
        await bus.send(propose(1))  # the owner's conversation: applied at once
        await bus.send(propose(2, is_owner=False, append="- from a stranger"))  # asks
        await bus.send(propose(3, path="USER.md", append="- likes tea"))  # off: refused
        for n, junk in enumerate(({"path": "config.toml"}, {"text": "x", "append": "y"},
                                  {"append": ""}), start=4):
            await bus.send(propose(n, **junk))

        async def letters() -> list[dict[str, Any]]:
            found = [d for d in await stored(bus, bus.subjects.stream_dlq)
                     if "malformed change proposal" in d["reason"]]
            return found if len(found) == 3 else []

        dead = await until(letters, 60)

        async def prompted() -> bool:
            return any(p["type"] == "approval.prompt"
                       for p in await stored(bus, bus.subjects.stream_out))

        await until(prompted, 60)
        # the agent's own tool, in the owner's turn: applied too (auto)
        call = ToolRequest(id="terminal:o:1:tool:0:0", session="terminal:owner",
                           turn_id="terminal:o:1", step=0, call_id="c1", name=TOOL,
                           arguments={"file": "AGENTS.md", "append": "- Say hi.",
                                      "reason": "greeting"}, is_owner=True,
                           principal="terminal:owner")
        await bus.send(signed(call, "owner"))  # as the planner signs it (capability token)

        async def result() -> dict[str, Any] | None:
            return next((e for e in await stored(bus, bus.subjects.stream_evt)
                         if e["type"] == "tool.result" and e["name"] == TOOL), None)

        told = await until(result, 60)
    agents = (home / "AGENTS.md").read_text()
    assert LESSON in agents and "- Say hi." in agents and "stranger" not in agents
    assert told["ok"] and "Applied change" in told["output"]
    assert (home / "USER.md").read_text() == before
    reasons = " | ".join(d["reason"] for d in dead)
    assert "'config.toml' is not one of the files" in reasons
    assert reasons.count("give exactly one of 'text'") == 2
    assert len(log(home)) == 3  # tracked, the lesson, the tool's change


def test_a_command_that_touches_the_prompt_files_is_pointed_to_the_tool() -> None:
    assert TOOL in hint("echo '- lesson' >> ~/AGENTS.md") and not hint("ls /workspace")


async def test_failed_tool_calls_become_proposed_lessons_and_a_malformed_answer_a_dead_letter(
    fake: FakeLLM, settings_for: SettingsFor, bus: Bus,
) -> None:
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model", WM__OBSERVER__LEARN="false",
                            WM__OBSERVER__IDLE_SECS="0.5", WM__MEMORY__AGENTS_MD="auto")
    agents = settings.home / "AGENTS.md"
    sink = Sink(channel="terminal", chat="owner")
    async with actors(settings, "llm", "executor", "observer"):
        for chat, output in (("a", "No such file: /backup/disk"), ("b", "garbage-json"),
                             ("c", None)):
            session = f"terminal:{chat}"
            turn = TurnRequest(id=f"{session}:1", session=session, principal="terminal:owner",
                               is_owner=True, text="back up my notes", reply_to=sink)
            await bus.send(turn)
            result = ToolResult(id=f"{session}:1:tool:0:0:result", session=session,
                                turn_id=turn.id, step=0, call_id="c", name="execute_command",
                                ok=output is None, output=output or "exit code 0\ndone")
            await bus.send(result)

        async def lesson() -> bool:
            return "find the cause before retrying" in agents.read_text()

        await until(lesson, 60)

        async def letter() -> dict[str, Any] | None:
            return next((d for d in await stored(bus, bus.subjects.stream_dlq)
                         if "malformed change proposal" in d["reason"]), None)

        dead = await until(letter, 60)
        requests = [r for r in fake.requests
                    if "[tool reflection]" in r["messages"][0]["content"]]
    assert "- When execute_command fails (No such file: /backup/disk)" in agents.read_text()
    assert "no JSON list" in dead["reason"] and "observer:reflection" in dead["reason"]
    assert len(requests) == 2  # session c had no failure: no reflection, no model call
    assert "garbage" not in agents.read_text()


async def test_an_agents_md_past_its_limit_is_consolidated_through_the_gate(
    fake: FakeLLM, settings_for: SettingsFor, bus: Bus,
) -> None:
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model",
                            WM__MEMORY__AGENTS_MD="auto")
    agents = settings.home / "AGENTS.md"
    agents.write_text("# AGENTS.md\n" + "".join(f"- lesson {i % 10}\n" for i in range(120)))
    async with actors(settings, "llm", "executor", "observer"):

        async def consolidated() -> bool:
            return len(agents.read_text().splitlines()) == 11

        await until(consolidated, 60)
    assert agents.read_text() == "# AGENTS.md\n" + "".join(f"- lesson {i}\n" for i in range(10))
    # both versions are kept: the long file (tracked as it was) and the consolidated one
    assert log(settings.home)[0].startswith("AGENTS.md: consolidated: it had grown past 100")


async def test_the_agent_proposes_the_owner_approves_in_chat_and_reverts_with_memory_revert(
    fake: FakeLLM, settings_for: SettingsFor,
) -> None:
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model")
    agents = settings.home / "AGENTS.md"
    before = agents.read_text()
    args = json.dumps({"file": "AGENTS.md", "append": "- Answer in English.",
                       "reason": "the owner asked"})
    async with actors(settings, *ALL), chat(settings) as owner:
        told = await owner.ask(f"tool:{TOOL} {args}", timeout=60)
        assert "the owner was asked to approve it" in told and agents.read_text() == before
        prompt = await owner.next(("approval",), timeout=60)
        assert "+- Answer in English." in prompt.text
        await owner.say(f"/approve {prompt.ref}")
        applied = await owner.next(("notice",), timeout=60)
        while "Applied change" not in applied.text:
            applied = await owner.next(("notice",), timeout=60)
        assert agents.read_text() == before + "- Answer in English.\n"
        await owner.say("/memory revert")
        reverted = await owner.next(("notice",), timeout=60)
        while "Reverted version" not in reverted.text:
            reverted = await owner.next(("notice",), timeout=60)
    assert agents.read_text() == before


async def test_versions_are_reverted_newest_first_and_a_hand_edit_is_a_version_too(
    settings_for: SettingsFor, bus: Bus,
) -> None:
    settings = settings_for(WM__MEMORY__AGENTS_MD="auto")
    agents = settings.home / "AGENTS.md"
    original = agents.read_text()
    async with actors(settings, "executor"):
        await bus.send(propose(1, append="- one"))
        await until(lambda: answer(settings, "history"))

        async def has(line: str) -> bool:
            return line in agents.read_text()

        await until(lambda: has("- one"), 30)
        agents.write_text(agents.read_text() + "- by hand\n")  # the owner edits the file
        await bus.send(propose(2, append="- two"))
        await until(lambda: has("- two"), 30)

        async def committed() -> bool:  # the file is written before its version is committed
            entries = log(settings.home)
            return len(entries) >= 3 and "(change " in entries[0]

        await until(committed, 30)
        first, hand, second = (log(settings.home)[i] for i in (2, 1, 0))
        versions = (await answer(settings, "history")).text.splitlines()[1:]
        oldest_change = versions[2].split()[0]
        refused = await answer(settings, "revert", oldest_change)
        newest = await answer(settings, "revert")
        hand_undone = await answer(settings, "revert", versions[1].split()[0])
        first_undone = await answer(settings, "revert", oldest_change)
        unknown = await answer(settings, "apply", "x.*>")  # never a KV key
    assert "(change " in first and hand == "AGENTS.md: edited outside the gate" and "(change " in second
    assert not refused.ok and "changed after version" in refused.text
    assert newest.ok and hand_undone.ok and first_undone.ok, (newest, hand_undone, first_undone)
    assert agents.read_text() == original
    assert not unknown.ok and "There is no proposed change 'x.*>'" in unknown.text
