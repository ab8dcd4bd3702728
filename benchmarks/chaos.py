"""`just chaos`: a randomized fault campaign against a real `wintermute up`, printing figures.

kill -9 of random actors at random points of turns, SIGSTOP of random actors, and the embedded
nats-server killed under load, and killed twice in a row with every core busy; at the end every turn is counted from the streams: sent, lost,
duplicated, and how long each kind of process took to come back.

    python -m benchmarks.chaos [--kills 24] [--freezes 2] [--nats-kills 2]
                               [--nats-double-kills 1] [--seed N]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import signal
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from actors import ACTORS
from benchmarks.chaos_kit import Driver, FakeModel, Instance, percentile, tally

STALE = 8.0  # supervisor.stale_after_secs for the campaign


async def kill_rounds(inst: Instance, drv: Driver, rng: random.Random, rounds: int,
                      ids: list[str], recovery: dict[str, list[float]]) -> None:
    for r in range(rounds):
        victim = rng.choice(list(ACTORS))
        old = await inst.actor_pid(victim)
        batch = [await drv.send(f"slow:{rng.choice([0.1, 0.4, 1.0, 2.0])} kill {r}.{k}")
                 for k in range(rng.randint(2, 5))]
        ids += batch
        await asyncio.sleep(rng.uniform(0.0, 2.0))
        os.kill(old, signal.SIGKILL)
        recovery[victim].append(await inst.recovered(victim, old))
        await drv.wait(batch, 120)
        print(f"  kill {r + 1}/{rounds}: {victim} back in {recovery[victim][-1]:.1f}s", flush=True)


async def freeze_rounds(inst: Instance, drv: Driver, rng: random.Random, rounds: int,
                        ids: list[str], detected: list[float]) -> None:
    for r in range(rounds):
        victim = rng.choice(list(ACTORS))
        old = await inst.actor_pid(victim)
        batch = [await drv.send(f"freeze {r}.{k}") for k in range(3)]
        ids += batch
        os.kill(old, signal.SIGSTOP)
        try:
            detected.append(await inst.recovered(victim, old, timeout=120))
        finally:
            try:
                os.kill(old, signal.SIGCONT)
            except ProcessLookupError:
                pass
        await drv.wait(batch, 120)
        print(f"  freeze {r + 1}/{rounds}: {victim} replaced after {detected[-1]:.1f}s",
              flush=True)


async def nats_rounds(inst: Instance, drv: Driver, rng: random.Random, rounds: int,
                      ids: list[str], back: list[float], drained: list[float]) -> None:
    for r in range(rounds):
        await inst.wait_healthy(120)
        batch: list[str] = []

        async def load(r: int = r, batch: list[str] = batch) -> None:
            for i in range(30):
                batch.append(await drv.send(f"nats {r}.{i}"))
                await asyncio.sleep(0.1)

        sender = asyncio.create_task(load())
        await asyncio.sleep(rng.uniform(0.5, 2.5))
        old = inst.runtime()["nats_pid"]
        os.kill(old, signal.SIGKILL)
        t0 = time.monotonic()
        while True:
            if inst.runtime()["nats_pid"] != old:
                break
            await asyncio.sleep(0.05)
        back.append(time.monotonic() - t0)
        await sender
        ids += batch
        await drv.wait(batch, 180)
        drained.append(time.monotonic() - t0)
        print(f"  nats kill {r + 1}/{rounds}: server back in {back[-1]:.2f}s, all 30 turns "
              f"answered {drained[-1]:.1f}s after the kill", flush=True)


async def next_nats_pid(inst: Instance, old: int) -> float:
    """Seconds until the supervisor has replaced the nats-server `old`."""
    t0 = time.monotonic()
    while True:
        if inst.runtime()["nats_pid"] != old:
            return time.monotonic() - t0
        await asyncio.sleep(0.05)


async def nats_twice_under_load(inst: Instance, drv: Driver, rounds: int, ids: list[str],
                                back: list[float], drained: list[float]) -> None:
    """nats-server killed, and killed again as soon as it is back, with every core kept busy
    by a busy loop: reconnection must converge on a slow machine."""
    hogs = [await asyncio.create_subprocess_exec(sys.executable, "-c", "while True: pass")
            for _ in range(os.cpu_count() or 2)]
    try:
        for r in range(rounds):
            await inst.wait_healthy(180)
            batch = [await drv.send(f"nats twice {r}.{i}") for i in range(10)]
            first = inst.runtime()["nats_pid"]
            os.kill(first, signal.SIGKILL)
            t0 = time.monotonic()
            await next_nats_pid(inst, first)
            second = inst.runtime()["nats_pid"]
            os.kill(second, signal.SIGKILL)
            back.append(await next_nats_pid(inst, second))
            ids += batch
            await drv.wait(batch, 300)
            drained.append(time.monotonic() - t0)
            print(f"  nats killed twice under CPU load {r + 1}/{rounds}: second crash replaced "
                  f"in {back[-1]:.2f}s, 10 turns answered {drained[-1]:.1f}s after the first "
                  "kill", flush=True)
    finally:
        for hog in hogs:
            hog.kill()
            await hog.wait()


def figures(values: list[float]) -> str:
    return f"p50 {percentile(values, 0.5):5.1f}s  max {max(values):5.1f}s  (n={len(values)})"


async def campaign(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    model = FakeModel()
    with tempfile.TemporaryDirectory() as tmp:
        inst = Instance(Path(tmp) / "home", model.url, {
            "WM__SUPERVISOR__STALE_AFTER_SECS": str(STALE),
            "WM__SUPERVISOR__MAX_RESTARTS": "1000",  # a campaign is not a crash loop
        })
        started = time.monotonic()
        inst.start()
        try:
            bus = await inst.connect()
            await inst.wait_healthy(120)
            print(f"up and healthy in {time.monotonic() - started:.1f}s; seed {args.seed}",
                  flush=True)
            drv = Driver(bus)
            ids: list[str] = []
            recovery: dict[str, list[float]] = defaultdict(list)
            detected: list[float] = []
            back: list[float] = []
            drained: list[float] = []
            await kill_rounds(inst, drv, rng, args.kills, ids, recovery)
            await freeze_rounds(inst, drv, rng, args.freezes, ids, detected)
            await nats_rounds(inst, drv, rng, args.nats_kills, ids, back, drained)
            await nats_twice_under_load(inst, drv, args.nats_double_kills, ids, back, drained)
            missing = await drv.wait(ids, 180)
            result = await tally(bus, ids)
            status = await inst.status()
        finally:
            if inst.bus is not None:
                await inst.bus.close()
            inst.kill()
            model.stop()
    print("\n== chaos figures ==")
    print(f"turns sent {len(ids)}, lost {len(result.lost())}, duplicated "
          f"{len(result.duplicated())}, unanswered at the end {len(missing)}")
    print("recovery after kill -9 (kill to a new process reporting health):")
    for name in ACTORS:
        if recovery.get(name):
            print(f"  {name:<10} {figures(recovery[name])}")
    every = [t for ts in recovery.values() for t in ts]
    if every:
        print(f"  {'all':<10} {figures(every)}")
    if detected:
        print(f"frozen (SIGSTOP) actor replaced: {figures(detected)} with stale_after {STALE:g}s")
    if back:
        print(f"nats-server back after kill -9:  {figures(back)}")
        print(f"all in-flight turns answered:    {figures(drained)}")
    print(f"supervisor: nats restarts {status.get('nats', {}).get('restarts')}, actor restarts "
          f"{sum(a['restarts'] for a in status.get('actors', []))}")
    return 1 if result.lost() or result.duplicated() or missing else 0


def main() -> None:
    logging.getLogger("bus.connection").setLevel(logging.ERROR)  # our own reconnect chatter
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=24)
    parser.add_argument("--freezes", type=int, default=2)
    parser.add_argument("--nats-kills", type=int, default=2)
    parser.add_argument("--nats-double-kills", type=int, default=1,
                        help="rounds of nats-server killed twice in a row under CPU load")
    parser.add_argument("--seed", type=int, default=int(time.time()))
    raise SystemExit(asyncio.run(campaign(parser.parse_args())))


if __name__ == "__main__":
    main()
