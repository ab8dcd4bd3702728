"""Hot-path figures of issue #14, measured through `wintermute up` with the scripted model
server in this process: framework overhead per turn (turn time minus the model's own time at
the server), the llm actor's own time per call, the ratio at 200 ms model latency, many
sessions at 1 s model latency, and sustained turns/s with 1, 2 and 4 llm replicas.

    python -m benchmarks.hot          (figures as JSON on stdout; `just bench` prints the table)
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from typing import Any

from benchmarks._instance import Instance, TimedLLM, Turn, cpu_seconds
from benchmarks._profile import Sampler

TURNS = 30
SESSIONS, PER_SESSION, LOAD_LIMIT = 1000, 3, 60.0
BURST = 300
PROFILED = ("llm", "planner", "memory", "channel", "observer")  # sampled during the 1-replica burst


def figure(name: str, value: Any, goal: str, met: bool | None, **detail: Any) -> dict[str, Any]:
    """One figure of the table, with the machine's load average when it was measured."""
    return {"figure": name, "value": value, "goal": goal, "met": met,
            "load": round(os.getloadavg()[0], 2), **detail}


def _pct(xs: list[float], q: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))]


async def _sequential(inst: Instance, text: str, n: int,
                      hops: list[dict[str, float]] | None = None,
                      ) -> tuple[list[float], list[float]]:
    """n turns one after another (each in a fresh chat): (turn seconds, model seconds); with
    `hops`, where each turn's time went, one dict per turn (see `_hops`)."""
    turns, model = [], []
    for _ in range(n):
        t = await inst.turn(text)
        end = await asyncio.wait_for(t.done, 60)
        turns.append(end - t.sent)
        model.append(inst.fake.model_time(t.sent, end))
        if hops is not None and (h := _hops(inst, t, end)):
            hops.append(h)
    return turns, model


def _hops(inst: Instance, t: Turn, end: float) -> dict[str, float] | None:
    """A one-call turn's time in ms by stretch, every instant on this process's clock: input
    sent -> recall asked (channel, planner) -> recalled (memory) -> model request on the bus
    (planner) -> the model server starts the call (llm actor) -> the model answers -> the
    response on the bus (llm actor) -> the reply delivered (planner, channel)."""
    key = next((k for k, v in inst.turns.items() if v is t and k.startswith("terminal:")), "")
    rid = f"{key}:llm:0"
    req, resp = inst.hops.requests.get(rid), inst.hops.responses.get(rid)
    span = next(((a, b) for a, b in inst.fake.spans
                 if req is not None and resp is not None and req <= a <= resp), None)
    asked, recalled = inst.hops.recalls.get(key), inst.hops.recalled.get(key)
    if req is None or resp is None or span is None or asked is None or recalled is None:
        return None
    ms = 1000.0
    return {"to_recall": (asked - t.sent) * ms, "recall": (recalled - asked) * ms,
            "to_model_request": (req - recalled) * ms, "llm_before_model": (span[0] - req) * ms,
            "model": (span[1] - span[0]) * ms, "llm_after_model": (resp - span[1]) * ms,
            "to_reply": (end - resp) * ms}


def _llm_overhead(inst: Instance) -> list[float]:
    """Per model call: request seen on the bus to response seen, minus the model's time."""
    out = []
    for rid, t0 in inst.hops.requests.items():
        t1 = inst.hops.responses.get(rid)
        if t1 is not None:
            out.append((t1 - t0) - inst.fake.model_time(t0, t1))
    return out


def _messages(before: dict[str, int], between: dict[str, int],
              after: dict[str, int]) -> dict[str, Any]:
    """NATS messages per turn that clients sent the server (publishes, JetStream API requests,
    acks), by client, for the plain turns and then the tool turns."""
    def per(a: dict[str, int], b: dict[str, int]) -> dict[str, float]:
        by = {k: round((v - a.get(k, 0)) / TURNS, 1) for k, v in b.items()}
        return {k: v for k, v in sorted(by.items(), key=lambda kv: -kv[1]) if v}

    plain, tool = per(before, between), per(between, after)
    return figure("NATS messages sent to the server per turn: plain / tool turn",
                  f"{plain.get('all', 0):.0f} / {tool.get('all', 0):.0f}", "a handful per hop",
                  None, plain_by_client=plain, tool_by_client=tool)


async def latency(fake: TimedLLM) -> list[dict[str, Any]]:
    figs = []
    async with Instance(fake).running() as inst:
        fake.latency = 0.001
        await _sequential(inst, "warm up", 3)
        await _sequential(inst, "run: true", 2)
        inst.hops.requests.clear()
        before = await inst.server_messages()
        hops: list[dict[str, float]] = []
        plain, pm = await _sequential(inst, "hello there", TURNS, hops)
        between = await inst.server_messages()
        over = [(a - b) * 1000 for a, b in zip(plain, pm, strict=True)]
        figs.append(figure("plain turn, model ~1 ms: framework overhead p50 (ms)",
                           round(statistics.median(over), 1), "<= 8", statistics.median(over) <= 8,
                           p95=round(_pct(over, 0.95), 1),
                           p50_ms_by_stretch={k: round(statistics.median(h[k] for h in hops), 2)
                                              for k in (hops[0] if hops else {})}))
        tool, tm = await _sequential(inst, "run: true", TURNS)
        after = await inst.server_messages()
        figs.append(_messages(before, between, after))
        over = [(a - b) * 1000 for a, b in zip(tool, tm, strict=True)]
        p50, p95 = statistics.median(over), _pct(over, 0.95)
        figs.append(figure("tool turn (2 model calls), model ~1 ms: overhead p50 / p95 (ms)",
                           f"{p50:.1f} / {p95:.1f}", "<= 15 / 30", p50 <= 15 and p95 <= 30))
        llm = [x * 1000 for x in _llm_overhead(inst)]
        figs.append(figure("llm actor over the model's own time, per call p50 (ms)",
                           round(statistics.median(llm), 1), "<= 2", statistics.median(llm) <= 2,
                           calls=len(llm), p95=round(_pct(llm, 0.95), 1)))
        fake.latency = 0.2
        slow, sm = await _sequential(inst, "run: true", 10)
        ratio = statistics.median([a / b for a, b in zip(slow, sm, strict=True)])
        figs.append(figure("tool turn at 200 ms model latency: turn / model time",
                           round(ratio, 3), "<= 1.03", ratio <= 1.03))
        figs.append(await _sessions(inst))
    return figs


async def _sessions(inst: Instance) -> dict[str, Any]:
    """SESSIONS chats each sending PER_SESSION turns in a row, model latency 1 s."""
    inst.fake.latency = 1.0
    answered = 0
    t0 = time.perf_counter()

    async def session(i: int) -> None:
        nonlocal answered
        for k in range(PER_SESSION):
            t = await inst.turn(f"session {i} turn {k}", chat=f"load{i}")
            await t.done
            answered += 1

    tasks = [asyncio.create_task(session(i)) for i in range(SESSIONS)]
    _, pending = await asyncio.wait(tasks, timeout=LOAD_LIMIT)
    took = time.perf_counter() - t0
    for task in pending:
        task.cancel()
    total = SESSIONS * PER_SESSION
    done = answered == total
    inst.fake.latency = 0.001
    return figure(f"{SESSIONS} sessions x {PER_SESSION} turns, model 1 s: all answered in (s)",
                  round(took, 1) if done else f"{answered} of {total} after {LOAD_LIMIT:.0f} s",
                  "<= 10", done and took <= 10)


async def throughput(fake: TimedLLM, replicas: int) -> dict[str, Any]:
    """BURST plain turns over 50 chats at once, model 0 ms: turns/s and CPU-ms per turn."""
    env = {"WM__ACTORS__LLM__REPLICAS": str(replicas)} if replicas > 1 else {}
    async with Instance(fake, env).running() as inst:
        fake.latency = 0.0
        await _sequential(inst, "warm up", 3)
        sampler = Sampler({n: inst.actor_pids[n] for n in PROFILED}) if replicas == 1 else None
        cpu0, t0 = cpu_seconds(inst.pid()), time.perf_counter()
        turns = [await inst.turn(f"burst {i}", chat=f"t{i % 50}") for i in range(BURST)]
        await asyncio.wait_for(asyncio.gather(*(t.done for t in turns)), 240)
        took = time.perf_counter() - t0
        cpu1 = cpu_seconds(inst.pid())
        profile = sampler.stop() if sampler is not None else {}
    by = {k: round((v - cpu0.get(k, 0.0)) * 1000 / BURST, 1) for k, v in cpu1.items()}
    cpu = sum(v - cpu0.get(k, 0.0) for k, v in cpu1.items())
    rate = BURST / took
    return figure(f"sustained turns/s, plain, model 0 ms, llm replicas {replicas}",
                  round(rate, 1), ">= 300", rate >= 300,
                  cpu_ms_per_turn=round(cpu * 1000 / BURST, 1), cores=round(cpu / took, 2),
                  cpu_ms_by_process=dict(sorted(by.items(), key=lambda kv: -kv[1])),
                  **({"profile_top": profile} if profile else {}))


async def figures(replicas: tuple[int, ...] = (1, 2, 4)) -> list[dict[str, Any]]:
    """Every hot-path figure, measured in one run."""
    fake = TimedLLM()
    await fake.start("openai")
    try:
        figs = await latency(fake)
        for n in replicas:
            figs.append(await throughput(fake, n))
    finally:
        await fake.stop()
    return figs


if __name__ == "__main__":
    print(json.dumps(asyncio.run(figures()), indent=2))
