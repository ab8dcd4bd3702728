"""Fault injection against a real `wintermute up`: bad payloads, a failing tool, a failing
scheduled task, a frozen actor, kill -9 of every actor mid-turn, and the nats-server killed
under load. Nothing may be lost or doubled; every fault is survived. Figures (recovery times)
are printed, never asserted: `just chaos` runs a longer campaign and reports them.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from actors import ACTORS
from benchmarks.chaos_kit import ROOT, Driver, Instance, read_stream, running_up, tally
from bus import Bus
from state.holds import task_status, tool_status

pytestmark = pytest.mark.slow

ENV = {
    "WM__SUPERVISOR__STALE_AFTER_SECS": "8",
    "WM__SUPERVISOR__FLATLINE__EXEMPT_TOOLS": "[]",  # so execute_command can stand in for a tool
    "WM__SUPERVISOR__FLATLINE__TOOL_CONSECUTIVE_FAILURES": "3",
    "WM__SUPERVISOR__FLATLINE__TOOL_TIMEOUTS": "2",
    "WM__SUPERVISOR__FLATLINE__DEAD_LETTER_SUMMARY_SECS": "2",
    "WM__EXECUTOR__TIMEOUT_SECS": "1",
    # A task whose model call always fails (HTTP 400 from the scripted model), every 2 seconds.
    "WM__SCHEDULED_TASKS": json.dumps([{"name": "doomed", "cron": "* * * * * */2",
                                        "prompt": "status:400"}]),
}


@pytest.fixture(scope="module")
async def wm(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Instance]:
    async with running_up(tmp_path_factory.mktemp("faults") / "home", ENV) as (inst, model):
        yield inst


@pytest.fixture
async def driver(wm: Instance) -> Driver:
    assert wm.bus is not None
    return Driver(wm.bus)


def cli(inst: Instance, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "supervisor.cli.main", *args], env=inst.env, cwd=ROOT,
                          text=True, capture_output=True, timeout=60)


async def ask(driver: Driver, text: str, timeout: float = 60) -> str:
    input_id = await driver.send(text)
    assert await driver.wait([input_id], timeout) == [], f"no reply to {text!r}"
    return driver.texts[input_id]


async def hold_of(bus: Bus, tool: str) -> tuple[str, str]:
    """(status, rule) of the tool's Flatline hold; ("", "") when it has none."""
    held = await tool_status(bus, tool)
    return (held.status, held.rule) if held is not None else ("", "")


async def restarts(inst: Instance) -> dict[str, int]:
    return {a["name"]: a["restarts"] for a in (await inst.status())["actors"]}


async def test_bad_payloads_on_every_inbox_are_dead_lettered_and_summarised(
    wm: Instance, driver: Driver
) -> None:
    bus = wm.bus
    assert bus is not None
    s = bus.subjects
    inboxes = [
        s.inbound("terminal", "fuzz"), s.outbound("terminal", "fuzz"),
        s.cmd("channel", "terminal"), s.cmd("planner", "reset"), s.cmd("llm", "complete"),
        s.cmd("executor", "run"), s.cmd("executor", "revert"), s.cmd("memory", "save"),
        s.cmd("memory", "search"), s.cmd("memory", "recall"), s.cmd("approval", "request"),
        s.cmd("approval", "decide"), s.evt("llm", "response", "x"), s.evt("tool", "result", "x"),
        s.evt("memory", "recalled", "x"), s.evt("approval", "resolved", "x"),
        s.evt("approval", "resolved", "flatline"), s.evt("tool", "outcome", "x"),
        s.evt("task", "outcome", "x"), s.evt("scripts", "reverted", "x"), s.dlq("fuzz"),
    ]
    bad = [
        b"\xff\xfe garbage", b'{"type": "turn.request", "id": "tr', b"[1,2,3]",
        b'{"type":"llm.request","id":"x","session":5}',  # wrong field type
        b'{"type":"session.idle","id":"wrong-type","session":"s","idle_secs":1,'
        b'"last_activity":1}',  # a valid message of a type no inbox takes
        b"{" + b"x" * 900_000,  # oversized (under JetStream's 1 MiB, over any sane message)
    ]
    before = await restarts(wm)
    _, dlq_start = await read_stream(bus, s.stream_dlq)
    for subject in inboxes:
        for payload in bad:
            await bus.js.publish(subject, payload)

    async def letters() -> list[dict[str, Any]]:
        # (what we injected on wm.dlq.fuzz is in this stream too, as it was sent)
        return [d for d in (await read_stream(bus, s.stream_dlq, ">", dlq_start))[0]
                if d["_subject"] != s.dlq("fuzz")]

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = {(d["subject"], d["payload"][:12]) for d in await letters()
               if d.get("type") == "deadletter"}
        if len({subj for subj, _ in got}) == len(inboxes) and len(got) >= len(inboxes) * len(bad):
            break
        await asyncio.sleep(0.5)
    found = await letters()
    assert all(d["type"] == "deadletter" and d["reason"] for d in found)
    for subject in inboxes:
        mine = [d for d in found if d["subject"] == subject]
        assert len({d["stream_seq"] for d in mine}) == len(bad), (subject, len(mine))
    assert await restarts(wm) == before, "a bad payload crashed an actor"
    assert (await ask(driver, "still alive?")) == "echo: still alive?"
    deadline = time.monotonic() + 30
    while not any("dead-lettered" in n for n in driver.notices) and time.monotonic() < deadline:
        await driver.poll()
        await asyncio.sleep(0.5)
    assert any("dead-lettered" in n and "wm.dlq" in n for n in driver.notices)


async def test_a_failing_tool_is_quarantined_refused_and_released(
    wm: Instance, driver: Driver
) -> None:
    assert wm.bus is not None
    for i in range(3):
        assert "exit code 7" in await ask(driver, f"run: echo try {i}; exit 7")
    deadline = time.monotonic() + 30
    while (await hold_of(wm.bus, "execute_command"))[0] != "quarantined":
        assert time.monotonic() < deadline, "execute_command was not quarantined"
        await asyncio.sleep(0.3)
    refused = await ask(driver, "run: echo should-not-run > refused.txt")
    assert "quarantined" in refused and "wintermute tools release execute_command" in refused
    assert not (wm.home / "workspace" / "refused.txt").exists()
    out = cli(wm, "status")
    assert "quarantined tool execute_command" in out.stdout, out.stdout

    out = cli(wm, "tools", "release", "execute_command")
    assert out.returncode == 0 and "Released the tool execute_command" in out.stdout
    assert "released-ok" in await ask(driver, "run: echo released-ok")

    # A tool that times out is quarantined too, and /tools release lifts it from the chat.
    for _ in range(2):
        assert "Timed out" in await ask(driver, "run: sleep 20")
    deadline = time.monotonic() + 30
    while await hold_of(wm.bus, "execute_command") != ("quarantined", "timeouts"):
        assert time.monotonic() < deadline, "timeouts did not quarantine the tool"
        await asyncio.sleep(0.3)
    # The chat asks; the supervisor applies it and tells the owner.
    assert "Asked the supervisor" in await ask(driver, "/tools release execute_command")
    deadline = time.monotonic() + 30
    while (await hold_of(wm.bus, "execute_command"))[0] != "active":
        assert time.monotonic() < deadline, "the supervisor did not apply /tools release"
        await asyncio.sleep(0.3)
    assert "back-again" in await ask(driver, "run: echo back-again")


async def test_a_failing_scheduled_task_is_disabled_until_enabled(
    wm: Instance, driver: Driver
) -> None:
    bus = wm.bus
    assert bus is not None

    async def fires() -> int:
        turns = (await read_stream(bus, bus.subjects.stream_in, "wm.in.schedule.>"))[0]
        return len([t for t in turns if t.get("session") == "task:doomed"])

    deadline = time.monotonic() + 90
    while (await task_status(bus, "doomed")).status != "disabled":
        assert time.monotonic() < deadline, "the failing task was not disabled"
        await asyncio.sleep(0.5)
    await asyncio.sleep(5)  # a fire already on its way may still land
    quiet_from = await fires()
    await asyncio.sleep(5)  # two and a half periods
    assert await fires() == quiet_from, "a disabled task fired"
    await driver.poll()
    assert any("I disabled the scheduled task doomed" in n for n in driver.notices)
    out = cli(wm, "tasks", "enable", "doomed")
    assert out.returncode == 0 and "enabled again" in out.stdout
    deadline = time.monotonic() + 30
    while await fires() == quiet_from:
        assert time.monotonic() < deadline, "the enabled task did not fire again"
        await asyncio.sleep(0.5)


async def test_a_frozen_actor_is_detected_and_replaced(wm: Instance, driver: Driver) -> None:
    old = await wm.actor_pid("planner")
    os.kill(old, signal.SIGSTOP)
    t0 = time.monotonic()
    try:
        took = await wm.recovered("planner", old, timeout=90)
    finally:
        try:
            os.kill(old, signal.SIGCONT)
        except ProcessLookupError:
            pass
    print(f"\nfrozen planner detected and replaced in {took:.1f}s (stale_after 8s)")
    while True:  # killed and reaped by the supervisor
        try:
            os.kill(old, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() - t0 < 120, "the frozen process was left behind"
        await asyncio.sleep(0.2)
    st = await wm.status()
    assert any(i["kind"] == "hung" and i["target"] == "planner" for i in st["interventions"])
    planner = next(a for a in st["actors"] if a["name"] == "planner")
    assert planner["last_exit"].startswith("hung")
    assert (await ask(driver, "after the freeze", timeout=90)) == "echo: after the freeze"


async def test_kill_9_at_random_points_loses_and_doubles_nothing(
    wm: Instance, driver: Driver
) -> None:
    assert wm.bus is not None
    rng = random.Random(os.environ.get("CHAOS_SEED", "faults"))
    victims = list(ACTORS)
    rng.shuffle(victims)
    ids: list[str] = []
    recovery: dict[str, float] = {}
    for round_, victim in enumerate(victims):
        old = await wm.actor_pid(victim)
        batch = [await driver.send(f"slow:{rng.choice([0.2, 0.6, 1.2])} r{round_} #{k}")
                 for k in range(3)]
        ids += batch
        await asyncio.sleep(rng.uniform(0.0, 1.8))  # somewhere inside the turns
        os.kill(old, signal.SIGKILL)
        recovery[victim] = await wm.recovered(victim, old)
        assert await driver.wait(batch, 90) == [], f"turns lost after killing {victim}"
    result = await tally(wm.bus, ids)
    print("\nrecovery after kill -9: " + ", ".join(f"{k} {v:.1f}s" for k, v in recovery.items()))
    assert result.lost() == [] and result.duplicated() == []
    assert all(n == 1 for n in result.turns.values())


async def test_nats_server_killed_under_load_loses_and_doubles_nothing(
    wm: Instance, driver: Driver
) -> None:
    bus = wm.bus
    assert bus is not None
    url, old_pid = wm.runtime()["nats_url"], wm.runtime()["nats_pid"]
    ids: list[str] = []

    async def load() -> None:
        for i in range(20):
            ids.append(await driver.send(f"under load {i}"))
            await asyncio.sleep(0.15)

    sender = asyncio.create_task(load())
    await asyncio.sleep(1.0)
    os.kill(old_pid, signal.SIGKILL)
    t0 = time.monotonic()
    await sender
    assert await driver.wait(ids, 120) == [], "turns lost across the NATS restart"
    print(f"\nall 20 turns answered {time.monotonic() - t0:.1f}s after the NATS kill")
    result = await tally(bus, ids)
    assert result.lost() == [] and result.duplicated() == []
    runtime = wm.runtime()
    assert runtime["nats_url"] == url and runtime["nats_pid"] != old_pid
    await wm.wait_healthy(60)
    st = await wm.status()
    assert st["nats"]["restarts"] >= 1 and st["nats"]["pid"] == runtime["nats_pid"]
    assert any(i["kind"] == "nats_restart" for i in st["interventions"])
