"""Import nats.py without aiohttp, which it loads only for WebSocket URLs.

nats.py's transport module imports aiohttp at import time (~0.1-0.35 s and ~14 MB in every
process) although only its WebSocket transport uses it, and our NATS URLs are nats:// or tls://.
While nats.py is first imported, `import aiohttp` is made to fail (a None entry in
sys.modules), which nats.py handles by leaving its WebSocket transport without it; the entry is
removed right after, so actors that do use aiohttp (the channel's webhooks) import it as usual.
`websocket_support()` hands aiohttp back to nats.py for a ws:// or wss:// URL.
"""

from __future__ import annotations

import sys

if "nats" not in sys.modules and "aiohttp" not in sys.modules:
    sys.modules["aiohttp"] = None  # type: ignore[assignment]
    try:
        import nats.aio.transport  # noqa: F401
    finally:
        del sys.modules["aiohttp"]


def websocket_support(url: str) -> None:
    """Give nats.py its aiohttp for a WebSocket URL (loaded only then)."""
    if not url.startswith(("ws://", "wss://")):
        return
    import aiohttp
    import nats.aio.transport

    setattr(nats.aio.transport, "aiohttp", aiohttp)  # noqa: B010 - not in its exports
