"""`wintermute probe NAME`: exit 0 when the actor in this pod (or on this machine) is alive.

Used as the Kubernetes liveness and readiness probe of every actor. It reads the health record
the actor process keeps in a local file (refreshed every `supervisor.health_interval_secs`) and
applies the supervisor's rule: a stale record, or one of the actor's loops (fetch loops, the
Telegram poller, ...) without progress, fails it. It needs no NATS connection, so a probe never
fails because the bus is slow, and it imports almost nothing (it runs every few seconds).
"""

from __future__ import annotations

import os
import sys
import time
import tomllib
from pathlib import Path

import msgspec

from contracts.liveness import local_health_path, stale_reason
from contracts.ops import Health

DEFAULT_STALE_SECS = 15.0


def probe(home: Path, actor: str, stale_after: float, now: float | None = None) -> str:
    """"" when healthy, else the reason (a sentence fragment)."""
    path = local_health_path(home, actor)
    try:
        record = msgspec.json.decode(path.read_bytes(), type=Health)
    except FileNotFoundError:
        return f"no health record at {path} (the actor has not started, or runs elsewhere)"
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        return f"unreadable health record at {path}: {exc}"
    return stale_reason(record, time.time() if now is None else now, stale_after)


def stale_after(home: Path) -> float:
    """supervisor.stale_after_secs as the supervisor reads it: env, else config.toml."""
    if value := os.environ.get("WM__SUPERVISOR__STALE_AFTER_SECS"):
        return float(value)
    try:
        with (home / "config.toml").open("rb") as fh:
            section = tomllib.load(fh).get("supervisor", {})
        return float(section.get("stale_after_secs", DEFAULT_STALE_SECS))
    except (OSError, ValueError, TypeError, tomllib.TOMLDecodeError):
        return DEFAULT_STALE_SECS  # the actor's own start-up reports a broken config


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: wintermute probe ACTOR", file=sys.stderr)
        return 2
    home = Path(os.environ.get("WINTERMUTE_HOME") or Path.home() / ".wintermute")
    stale = stale_after(home)
    reason = probe(home, args[0], stale)
    if reason:
        print(f"{args[0]} is not healthy: {reason}", file=sys.stderr)
        return 1
    print(f"{args[0]} is healthy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
