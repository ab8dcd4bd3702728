"""Fault rounds for `just chaos` beyond killing processes: a memory store that cannot write, a
model outage, oversized history and many chats at once. Each round reports lost, duplicated
and stuck turns and what users were told; the campaign runs with default settings.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any

from benchmarks.chaos_kit import Driver, FakeModel, Instance, read_stream, tally
from contracts import TerminalInput


@dataclass
class Round:
    """What one fault did to the turns sent during it."""

    name: str
    ids: list[str] = field(default_factory=list)
    lost: int = 0
    duplicated: int = 0
    stuck: int = 0
    told: list[str] = field(default_factory=list)  # sentences users got instead of an answer
    note: str = ""

    def line(self) -> str:
        told = f", told {len(self.told)}x: {self.told[0][:70]!r}" if self.told else ""
        note = f" ({self.note})" if self.note else ""
        return (f"  {self.name:<18} sent {len(self.ids):>3}, lost {self.lost}, duplicated "
                f"{self.duplicated}, stuck {self.stuck}{told}{note}")


def script_faults(model: FakeModel, faults: list[str]) -> None:
    """Script the model server's next answers (500, hang, garbage), one per request."""
    req = urllib.request.Request(
        f"{model.url.removesuffix('/v1')}/_fake/faults", data=json.dumps(faults).encode(),
        headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=10):
        pass


def _chattr(flag: str, path: object) -> bool:
    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", "-R", flag, str(path)], capture_output=True).returncode == 0


async def _settle(inst: Instance, drv: Driver, rnd: Round, timeout: float,
                  failed_marks: tuple[str, ...]) -> None:
    missing = await drv.wait(rnd.ids, timeout)
    assert inst.bus is not None
    result = await tally(inst.bus, rnd.ids)
    rnd.lost, rnd.duplicated = len(result.lost()), len(result.duplicated())
    rnd.stuck = len(missing)
    rnd.told = [drv.texts[i] for i in rnd.ids if i in drv.texts
                and any(m in drv.texts[i] for m in failed_marks)]


async def memory_round(inst: Instance, drv: Driver) -> Round:
    rnd = Round("memory unwritable")
    memory = inst.home / "data" / "memory"
    if not _chattr("+i", memory):
        rnd.note = "skipped: chattr +i not available"
        return rnd
    try:
        for i in range(6):
            rnd.ids.append(await drv.send(f"remember: chaos fact {i}"))
            rnd.ids.append(await drv.send(f"memory fault turn {i}"))
        await _settle(inst, drv, rnd, 180, ("Not saved",))
    finally:
        _chattr("-i", memory)
    return rnd


async def outage_round(inst: Instance, drv: Driver, model: FakeModel) -> Round:
    rnd = Round("model outage")
    script_faults(model, ["500"] * 18)  # a few attempts of each turn fail; retries outlast it
    rnd.ids = [await drv.send(f"outage turn {i}") for i in range(4)]
    await _settle(inst, drv, rnd, 240, ("couldn't reach any configured model",))
    script_faults(model, [])
    return rnd


async def oversized_round(inst: Instance, drv: Driver) -> Round:
    rnd = Round("oversized history")
    rnd.ids = [await drv.send(f"big {i} " + "x" * 120_000) for i in range(2)]
    rnd.ids.append(await drv.send("small after the big ones"))
    rnd.ids.append(await drv.send("huge " + "y" * 600_000))
    rnd.ids.append(await drv.send("small after the huge one"))
    await _settle(inst, drv, rnd, 180, ("too large",))
    return rnd


async def many_chats_round(inst: Instance, chats: int = 10, turns: int = 3) -> Round:
    """Turns from many chats at once (not only the owner's); replies counted per chat."""
    assert inst.bus is not None
    bus = inst.bus
    rnd = Round(f"{chats} chats at once")
    sent: dict[str, str] = {}
    for t in range(turns):
        for c in range(chats):
            msg = TerminalInput(id=uuid.uuid4().hex, chat=f"chaos{c}", text=f"chat {c} turn {t}")
            await bus.publish(bus.subjects.cmd("channel", "terminal"), msg)
            sent[msg.id] = msg.chat
    rnd.ids = list(sent)
    deadline = time.monotonic() + 240
    counts: dict[str, int] = {}
    while time.monotonic() < deadline:
        counts = dict.fromkeys(sent, 0)
        events, _ = await read_stream(bus, bus.subjects.stream_evt, "wm.evt.channel.delivered.>")
        for e in events:
            ref = str(e.get("ref", "")).removeprefix("terminal:")
            if ref in counts and e.get("kind") in ("reply", "suppressed"):
                counts[ref] += 1
        if all(counts.values()):
            break
        await asyncio.sleep(1)
    rnd.lost = sum(1 for n in counts.values() if n == 0)
    rnd.duplicated = sum(1 for n in counts.values() if n > 1)
    return rnd


async def fault_rounds(inst: Instance, drv: Driver, model: FakeModel) -> list[Round]:
    rounds = [await memory_round(inst, drv), await outage_round(inst, drv, model),
              await oversized_round(inst, drv), await many_chats_round(inst)]
    for rnd in rounds:
        print(rnd.line(), flush=True)
    return rounds


async def settled_status(inst: Instance, wait: float = 15.0) -> dict[str, Any]:
    """The supervisor's status once the planner reports no turn in progress (health is a few
    seconds behind), or as it is after `wait` seconds: a turn still there then is stuck."""
    deadline = time.monotonic() + wait
    while True:
        status = await inst.status()
        if "0 turns in progress" in status_turns(status) or time.monotonic() > deadline:
            return status
        await asyncio.sleep(1)


def status_turns(status: dict[str, Any]) -> str:
    """What `status` says of turns in progress (from the planner's health)."""
    for actor in status.get("actors", []):
        if actor.get("name") == "planner":
            info = actor.get("info") or {}
            return (f"{info.get('active_turns', 0)} turns in progress, "
                    f"{info.get('stuck_turns', 0)} stuck")
    return "planner not reported"
