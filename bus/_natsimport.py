"""Import nats.py without aiohttp, which it loads only for WebSocket URLs, and without
importlib.metadata, which it loads only to read its own version.

nats.py's transport module imports aiohttp at import time (~0.1-0.35 s and ~14 MB in every
process) although only its WebSocket transport uses it, and our NATS URLs are nats:// or tls://.
Its client module imports importlib.metadata (with zipfile, email, csv, ...: ~1.7 MB in every
process) for `version("nats-py")`, the version it reports in CONNECT.
While nats.py is first imported, both imports are made to fail (a None entry in sys.modules),
which nats.py handles (WebSocket transport without aiohttp, version "0.0.0"); the entries are
removed right after, so code that does use them imports them as usual. The version is then read
from the name of nats-py's dist-info folder; `websocket_support()` hands aiohttp back to
nats.py for a ws:// or wss:// URL.
"""

from __future__ import annotations

import sys
from pathlib import Path

_BLOCKED = ("aiohttp", "importlib.metadata")


def _version(package_dir: Path) -> str:
    """nats-py's version from its `nats_py-X.Y.Z.dist-info` folder ("0.0.0" if none)."""
    for info in package_dir.parent.glob("nats_py-*.dist-info"):
        return info.name[len("nats_py-"):-len(".dist-info")]
    return "0.0.0"


if "nats" not in sys.modules:
    blocked = [name for name in _BLOCKED if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        import nats.aio.client
        import nats.aio.transport  # noqa: F401
    finally:
        for name in blocked:
            del sys.modules[name]
    if nats.aio.client.__version__ == "0.0.0" and nats.__file__:
        nats.aio.client.__version__ = _version(Path(nats.__file__).parent)


def websocket_support(url: str) -> None:
    """Give nats.py its aiohttp for a WebSocket URL (loaded only then)."""
    if not url.startswith(("ws://", "wss://")):
        return
    import aiohttp
    import nats.aio.transport

    setattr(nats.aio.transport, "aiohttp", aiohttp)  # noqa: B010 - not in its exports
