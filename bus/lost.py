"""The last resort for what the bus could not store: a local JSON-lines file, 0600.

A dead letter whose publish fails (a full store, NATS away) would otherwise vanish without
trace. The file sits next to the logs (`logs/lost.jsonl` under the home, set by the actor
runtime); JetStream's storage limit keeps a margin of the disk free, so there is room for it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_path: Path | None = None


def set_path(path: Path | None) -> None:
    """Where lost messages go (None: only the process log)."""
    global _path
    _path = path


def keep(kind: str, reason: str, record: dict[str, Any]) -> bool:
    """Append one record; True when it reached the file (else it is in the process log)."""
    line = json.dumps({"ts": time.time(), "kind": kind, "why_lost": reason, "record": record},
                      default=str)
    if _path is None:
        log.error("lost %s (%s): %s", kind, reason, line[:4000])
        return False
    try:
        _path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a") as f:
            f.write(line + "\n")
        return True
    except OSError as exc:
        log.error("lost %s (%s), and %s is not writable (%s): %s", kind, reason, _path, exc,
                  line[:4000])
        return False
