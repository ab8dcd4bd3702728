"""Signing and checking capability tokens (contracts/capability.py) with a per-home key.

The key is 32 random bytes in `data/keys/capability.key` (0600, folder 0700), made once by
whichever of the planner or the executor starts first (an atomic link, so both read the same
key); `WINTERMUTE_CAPABILITY_KEY` (hex) overrides it where the two run apart (Kubernetes).
No other actor reads it. Like the NATS seeds it is readable by code running as the owner's OS
user: it bounds what the actors' own code (a bug, or a steered model) can forge on the bus.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
from pathlib import Path
from typing import Any

import msgspec

from contracts.capability import Capability
from kit.private import open_private, private_dir

ENV = "WINTERMUTE_CAPABILITY_KEY"
_enc = msgspec.json.Encoder(order="sorted")


def key_path(home: Path) -> Path:
    return home / "data" / "keys" / "capability.key"


def load_key(home: Path) -> bytes:
    """The signing key: from the environment, else the home's key file (made if missing)."""
    if os.environ.get(ENV):
        try:
            return bytes.fromhex(os.environ[ENV])
        except ValueError:
            raise ValueError(f"{ENV} must be a hex string (e.g. from `openssl rand -hex 32`); "
                             "fix it or unset it to use data/keys/capability.key") from None
    path = key_path(home)
    if not path.exists():
        private_dir(path.parent)
        tmp = path.with_name(f"capability.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        with open_private(tmp, "w") as fh:
            fh.write(secrets.token_hex(32))
        with contextlib.suppress(FileExistsError):  # the other actor made it first: use theirs
            os.link(tmp, path)
        tmp.unlink()
    return bytes.fromhex(path.read_text().strip())


def digest(arguments: dict[str, Any]) -> str:
    """The arguments' fingerprint (key order does not matter)."""
    return hashlib.sha256(_enc.encode(arguments)).hexdigest()


def _mac(key: bytes, cap: Capability) -> str:
    body = _enc.encode(msgspec.structs.replace(cap, sig=""))
    return hmac.new(key, body, hashlib.sha256).hexdigest()


def sign(key: bytes, cap: Capability) -> Capability:
    return msgspec.structs.replace(cap, sig=_mac(key, cap))


def genuine(key: bytes, cap: Capability) -> bool:
    """Whether the token was signed with `key` and not changed since."""
    return hmac.compare_digest(cap.sig, _mac(key, cap))
