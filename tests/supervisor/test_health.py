"""Health judgement: stale reports and stuck loops, grace after a NATS outage, and watch mode
(Kubernetes) telling the owner when an actor turns unhealthy and when it is back."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from bus import Bus
from contracts import Health
from supervisor.process.supervisor import Supervisor


def health(pid: int = 10, age: float = 0.0, loop_age: float = 0.0) -> Health:
    now = time.time()
    return Health(actor="planner", pid=pid, started=now - 100, ts=now - age,
                  loops={"fetch:planner-in": now - loop_age}, periods={"fetch:planner-in": 1.0})


def supervisor(settings_for: Any, bus: Bus, only: tuple[str, ...] = ("planner",),
               **env: str) -> Supervisor:
    settings = settings_for(WM__SUPERVISOR__STALE_AFTER_SECS="5", **env)
    sup = Supervisor(settings, bus, "nats://unused", spawn=False, only=list(only))
    sup.view.load = lambda: 0.5  # an idle machine, whatever this one is doing
    return sup


@dataclass
class Proc:
    """What HealthWatch.judge looks at in the supervisor's ActorState."""

    pid: int | None
    started: float
    kill_reason: str = ""


async def test_a_busy_machine_stretches_the_start_deadline_and_staleness(
    bus: Bus, settings_for: Any
) -> None:
    view = supervisor(settings_for, bus, WM__SUPERVISOR__STARTUP_GRACE_SECS="60").view
    view.bus_back_at = 0.0
    now = time.time()
    view._measure(now)
    assert not view.busy
    assert "no health in the 100s" in view.hung_reason("planner", 10, now - 100, now)
    view.load = lambda: 9.0  # load 18 on 2 cores: stretched 4 times at most (the default)
    view._measure(now)
    assert view.busy and view.stretch == 4.0
    assert view.hung_reason("planner", 10, now - 100, now) == ""  # slow, not dead
    assert view.hung_reason("planner", 10, now - 241, now) != ""  # past 4 x 60 s
    assert view.stale_reason(health(age=9), now) == ""  # 5 s stale limit -> 20 s
    assert view.stale_reason(health(age=21), now) != ""


async def test_most_actors_late_at_once_on_a_busy_machine_kills_none(
    bus: Bus, settings_for: Any
) -> None:
    names = ("planner", "llm", "memory", "executor")
    sup = supervisor(settings_for, bus, names)
    sup.view.bus_back_at = 0.0
    now = time.time()
    procs = {n: Proc(pid=100 + i, started=now - 500) for i, n in enumerate(names)}
    assert set(sup.watch.judge(procs, now)) == set(names)  # idle machine: they are hung
    sup.view.load = lambda: 9.0
    sup.view._measure(now)
    assert sup.watch.judge(procs, now) == {}  # busy machine, all late: the machine is slow
    sup.view.health = {n: health(pid=100 + i) for i, n in enumerate(names[1:], 1)}
    assert set(sup.watch.judge(procs, now)) == {"planner"}  # one alone is still judged


async def test_a_starved_supervisor_restarts_the_clocks(bus: Bus, settings_for: Any) -> None:
    view = supervisor(settings_for, bus).view
    view.bus_back_at = 0.0
    now = time.time()
    view._measure(now - 60)  # the previous round, a minute ago (it should be 2 s)
    view._measure(now)
    assert view.bus_back_at == now
    assert view.stale_reason(health(age=30, loop_age=30), now) == ""


async def test_stale_health_and_stuck_loops_are_named(bus: Bus, settings_for: Any) -> None:
    view = supervisor(settings_for, bus).view
    view.bus_back_at = 0.0
    now = time.time()
    assert view.stale_reason(health(), now) == ""
    assert "not reported health for 9s" in view.stale_reason(health(age=9), now)
    assert "fetch:planner-in loop made no progress" in view.stale_reason(health(loop_age=7), now)
    assert view.hung_reason("planner", 10, now - 1, now) == ""  # no record yet, in its grace
    assert "no health in the 100s" in view.hung_reason("planner", 10, now - 100, now)
    view.health["planner"] = health(age=9)
    assert view.hung_reason("planner", 10, now - 100, now).startswith("it has not reported")
    assert view.hung_reason("planner", 11, now - 1, now) == ""  # a new process in its grace


async def test_a_nats_outage_is_not_mistaken_for_hung_actors(bus: Bus, settings_for: Any
                                                             ) -> None:
    view = supervisor(settings_for, bus).view
    now = time.time()
    view.health["planner"] = health(age=30, loop_age=30)  # nobody could report meanwhile
    view.bus_down = True
    assert view.hung_reason("planner", 10, now - 100, now) == ""
    view.bus_down = False
    view.nats_restarted()
    assert view.hung_reason("planner", 10, now - 100, time.time()) == ""
    assert view.hung_reason("planner", 10, now - 100, time.time() + 6) != ""  # then it counts


async def test_watch_mode_tells_the_owner_when_health_changes(bus: Bus, settings_for: Any) -> None:
    sup = supervisor(settings_for, bus, WM__SUPERVISOR__STARTUP_GRACE_SECS="0")
    sup.view.bus_back_at = 0.0  # judge ages from the records themselves
    bucket = bus.subjects.kv_health
    await bus.kv_put(bucket, "planner", health(age=30))
    assert await sup.view.refresh()
    await sup.watch.announce_changes(sup.actors, since=0)
    await bus.kv_put(bucket, "planner", health())
    assert await sup.view.refresh()
    await sup.watch.announce_changes(sup.actors, since=0)
    await sup.watch.announce_changes(sup.actors, since=0)  # no change, nothing said

    info = await bus.js.stream_info(bus.subjects.stream_out)
    texts = [json.loads((await bus.js.get_msg(bus.subjects.stream_out, seq)).data or b"")["text"]
             for seq in range(info.state.first_seq, info.state.last_seq + 1)]
    assert len(texts) == 2
    assert texts[0].startswith("The planner actor looks unhealthy: it has not reported health")
    assert texts[1] == "The planner actor is healthy again."
    status = sup.status()
    assert status.mode == "watch" and status.actors[0].healthy
