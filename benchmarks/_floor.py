"""The memory floor of one process of this stack: the interpreter, asyncio and nats.py,
connected with an nkey and idle, none of our code (what every actor pays before its own).

    python -m benchmarks._floor URL SEED_FILE INBOX_PREFIX    (prints {"rss_mb", "pss_mb"})

nats.py is imported the way bus/_natsimport.py does it (without aiohttp and importlib.metadata),
so the difference to an actor at rest is our code and its data.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path


def _rollup() -> dict[str, float]:
    out = {}
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("Rss", "Pss"):
            out[f"{key.lower()}_mb"] = round(int(value.split()[0]) / 1024, 1)
    return out


async def _main(url: str, seed: str, inbox: str) -> dict[str, float]:
    for name in ("aiohttp", "importlib.metadata"):
        sys.modules[name] = None  # type: ignore[assignment]
    import nats

    for name in ("aiohttp", "importlib.metadata"):
        del sys.modules[name]
    nc = await nats.connect(url, nkeys_seed=seed, inbox_prefix=inbox, connect_timeout=30)
    try:
        await asyncio.sleep(1.0)  # at rest, connected
        return _rollup()
    finally:
        await nc.close()


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_main(*sys.argv[1:4]))))
