"""Bus throughput: JetStream publish (sequential and concurrent) and consume-to-ack rate."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from bus import Bus, Consumer, Subscription
from contracts import TerminalInput
from supervisor.process.natsserver import EmbeddedNats

N = 5000


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedNats(Path(tmp) / "js")
        url = await server.start()
        bus = await Bus(url, "bench").connect()
        await bus.provision()
        subject = bus.subjects.cmd("bench", "x")

        t0 = time.perf_counter()
        for i in range(N):
            await bus.publish(subject, TerminalInput(id=f"s{i}", chat=f"c{i % 50}", text="x" * 200))
        seq = N / (time.perf_counter() - t0)

        t0 = time.perf_counter()
        for start in range(0, N, 500):
            await asyncio.gather(*(
                bus.publish(subject, TerminalInput(id=f"p{i}", chat=f"c{i % 50}", text="x" * 200))
                for i in range(start, start + 500)
            ))
        conc = N / (time.perf_counter() - t0)

        done = asyncio.Event()
        count = 0

        async def handler(_: TerminalInput) -> None:
            nonlocal count
            count += 1
            if count == 2 * N:
                done.set()

        sub = Subscription(bus.subjects.stream_cmd, "bench", (subject,), ordered_by="chat",
                           concurrency=64, max_ack_pending=1024)
        consumer = Consumer(bus, "bench", sub, TerminalInput, handler)
        t0 = time.perf_counter()
        task = asyncio.create_task(consumer.run())
        await done.wait()
        consumed = 2 * N / (time.perf_counter() - t0)
        await consumer.stop(1)
        task.cancel()
        await bus.close()
        await server.stop()
    print(f"publish, awaiting each:     {seq:8.0f} msg/s  ({N} messages, 200-byte text)")
    print(f"publish, 500 concurrent:    {conc:8.0f} msg/s")
    print(f"consume (decode, dedupe check, handle, done marker, ack; 50 sessions): "
          f"{consumed:8.0f} msg/s")


if __name__ == "__main__":
    asyncio.run(main())
