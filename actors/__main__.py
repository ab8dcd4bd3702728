"""`python -m actors NAME`: run one actor in the foreground (what the supervisor spawns).

It lives with the actors so that supervisor/ never imports actor code: the supervisor and
`wintermute actor NAME` (Kubernetes) start this module as a process instead.
"""

from __future__ import annotations

import asyncio
import sys

from actors import ACTORS
from actors.runtime import run_actor
from contracts.config import ConfigError, load_settings


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ACTORS:
        print(f"usage: python -m actors NAME, where NAME is one of: {', '.join(ACTORS)}",
              file=sys.stderr)
        return 2
    try:
        # Only the heartbeat runs cron schedules; the others leave their syntax to it and `up`.
        settings = load_settings(cron=argv[0] == "heartbeat")
    except ConfigError as exc:
        print(f"Configuration error: {exc}", file=sys.stderr)
        return 2
    asyncio.run(run_actor(argv[0], settings))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
